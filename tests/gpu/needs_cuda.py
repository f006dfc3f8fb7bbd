"""`make test-gpu`'s first step: exit 0 when torch sees a CUDA GPU, else print one line saying why not and exit 2.

Run as ``python tests/gpu/needs_cuda.py``; nothing else of the GPU run starts when it fails.

>>> no_cuda_message("2.13.0+cpu", None).split(". ")[0][-43:]
'is False (torch 2.13.0+cpu, CUDA build: no)'
"""
from __future__ import annotations

import sys

#: exit status when there is no GPU (make's own "error" status, so `make test-gpu` fails the same way either way)
NO_GPU = 2


def no_cuda_message(torch_version: str, cuda_version: str | None) -> str:
    """The one line `make test-gpu` prints when ``torch.cuda.is_available()`` is False.

    ``cuda_version`` is ``torch.version.cuda`` (``None`` for a CPU build): a CPU build needs a CUDA build of torch
    first, a CUDA build needs a GPU it can see.

    >>> "CUDA build: yes, CUDA 12.8" in no_cuda_message("2.13.0+cu128", "12.8")
    True
    """
    head = ("make test-gpu needs a CUDA GPU; this machine has none: torch.cuda.is_available() is False "
            f"(torch {torch_version}, CUDA build: ")
    if cuda_version:
        return (head + f"yes, CUDA {cuda_version}). Run it on a machine with an NVIDIA GPU and its driver "
                "(nvidia-smi lists it; CUDA_VISIBLE_DEVICES does not hide it).")
    return (head + "no). It needs a CUDA build of torch too: on a GPU machine, `make test-gpu VENV=.venv-cuda` "
            "installs PyPI's torch for Linux, a CUDA build (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cuXYZ "
            "picks another CUDA version); `make test-gpu TORCH=` keeps a CUDA torch you installed in the venv "
            "yourself.")


def main() -> int:
    """Exit status for `make test-gpu`: 0 with a CUDA GPU, else :data:`NO_GPU` after printing the one line."""
    import torch

    if torch.cuda.is_available():
        return 0
    print(no_cuda_message(torch.__version__, torch.version.cuda), file=sys.stderr)
    return NO_GPU


if __name__ == "__main__":
    sys.exit(main())
