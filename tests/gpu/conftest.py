"""tests/gpu: run by `make test-gpu` on a CUDA GPU only (pyproject.toml's norecursedirs keeps them out of `make test`).

Collected anywhere (``pytest --collect-only tests/gpu``); without a GPU every test skips with the reason.
"""
import pytest
import torch


@pytest.fixture
def cuda() -> torch.device:
    """The CUDA device; skips the test where torch sees none."""
    if not torch.cuda.is_available():
        pytest.skip(f"needs a CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__}, "
                    f"CUDA build: {'yes' if torch.version.cuda else 'no'})")
    return torch.device("cuda")
