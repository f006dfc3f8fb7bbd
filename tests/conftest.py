"""Fixtures shared by the unit tests."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The kit's models are tiny: one thread is as fast and much steadier when other jobs share the CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
