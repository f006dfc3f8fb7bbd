"""The kit's front-view base (:mod:`ampkit.widgets.front`): the rules every view drawn in the browser shares on the
Python side — the answer to the page's "hello" (``js/kit.js`` ``kernelPresence``: a page knows a kernel is behind it
only by this answer, never by a timer) and ``format_limits``' ``via_float32`` read from torch."""
from __future__ import annotations

import math

import pytest
import torch

from ampkit.formats import FORMATS, info
from ampkit.formats.registry import cast
from ampkit.widgets.front import FrontView, _via_float32, format_limits


class _Plain(FrontView):
    _front = "rounding"


class _Hi(FrontView):
    _front = "rounding"

    def __init__(self) -> None:
        self.said: list[str] = []
        super().__init__()

    def hello(self) -> None:
        self.said.append("hello")


def _sent(view: FrontView) -> list:
    out: list = []
    view.send = out.append          # what the kernel sends the page
    return out


def test_every_front_view_answers_hello_with_here() -> None:
    view = _Plain()
    sent = _sent(view)
    view._handle_custom_msg({"event": "hello"}, [])     # as the comm delivers the page's message
    assert sent == [{"event": "here"}]
    for other in ({"event": "measure"}, {"type": "hello"}, "hello", None, {}):
        view._handle_custom_msg(other, [])
    assert sent == [{"event": "here"}]                  # only the page's hello is answered, once per hello


def test_a_view_adds_to_the_answer_after_here() -> None:
    view = _Hi()
    sent = _sent(view)
    view._handle_custom_msg({"event": "hello"}, [])
    assert sent == [{"event": "here"}] and view.said == ["hello"]


@pytest.mark.parametrize("fmt", sorted({info(f).name for f in FORMATS}))
def test_via_float32_is_read_from_torchs_cast(fmt: str) -> None:
    """Just inside the overflow line and just above the flush line, one rounding gives ``max`` and the smallest
    subnormal; torch's cast gives what rounding to float32 first gives, and where that differs from one rounding
    (at either line) ``via_float32`` is True."""
    fi = info(fmt)
    probes = [math.nextafter(fi.overflow_threshold, 0.0), math.nextafter(fi.flush_threshold, math.inf)]
    got = [cast(p, fi.dtype) for p in probes]
    if fi.bits < 32:
        assert got == [cast(float(torch.tensor(p, dtype=torch.float32)), fi.dtype) for p in probes]
    twice = fi.bits < 32 and got != [fi.max, fi.smallest_subnormal]
    assert format_limits(fmt)["via_float32"] == _via_float32(fi) == twice, (fmt, got)


def test_fp8_casts_go_through_float32() -> None:
    assert [format_limits(f)["via_float32"] for f in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp32")] == \
        [True, True, True, True, False]
