"""Fixtures shared by the unit tests."""
import pytest
import torch
from book_fixture import book_fixture  # noqa: F401  (the book, built once a session: tests/book_fixture.py)

# Transformer Engine's reference quantizers, copied verbatim at their tags: the FP4 tests load them through
# te_reference/load.py (which stubs their transformer_engine imports); collected as modules (--doctest-modules) they
# would import transformer_engine, which a CPU machine cannot install.
collect_ignore = ["te_reference"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The kit's models are tiny: one thread is as fast and much steadier when other jobs share the CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _language_put_back():
    """A test that chooses the kit's language (ampkit.i18n.set_language) leaves the choice as it found it: a later
    test relies on the rule (the argument, then $AMPKIT_LANG, then English), not on whichever test ran before."""
    from ampkit import i18n

    before = i18n._chosen
    yield
    i18n._chosen = before
