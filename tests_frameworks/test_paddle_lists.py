"""The kit's Paddle list tables (:mod:`ampkit.precision.frameworks`) against the installed PaddlePaddle 3.3.1's own
``paddle.amp.white_list()`` / ``black_list()`` (``make test-frameworks``; issue 33).

The kit's tables were read from ``python/paddle/amp/amp_lists.py`` at PaddlePaddle 3.3.1 (docs/reference.md).
What they say and what the installed Paddle returns, level by level:

- white lists, fp16 and bf16, at OD, O1 and O2: identical.
- black list at O1: Paddle's is the kit's ``PADDLE_FP16_BLACK`` (= its ``FP16_BLACK_LIST``) PLUS
  ``EXTRA_BLACK_LIST`` — 8 ops (interpolations, ``lookup_table``, ``scatter``) kept in fp32 for speed, not
  numerics, which the kit leaves out on purpose (its module docstring says so): asserted as exactly that set.
- black list at O2: Paddle's is ``EXTRA_BLACK_LIST`` ONLY — at O2 the numerics black list (softmax, layer_norm,
  log, the losses...) is not applied: everything not in the extra list runs in the low dtype. The kit's
  ``paddle_list()`` answers for O1 (its docstring: "Paddle's default O1 lists"); asserted here so the notebook can
  say it.
- black list at OD ("op-default"): empty. The kit has no OD level.
- the static graph's ``gray_list`` (``paddle.static.amp.fp16_lists``): the kit's ``PADDLE_STATIC_GRAY`` is part
  of it ("Part of Paddle's static-graph gray_list"), asserted as a subset.

Run in a process of its own (Paddle imported before MindSpore in one process breaks MindSpore).
"""
from __future__ import annotations

import pytest

paddle = pytest.importorskip("paddle")
from paddle.amp import amp_lists  # noqa: E402
from paddle.static.amp import fp16_lists  # noqa: E402

from ampkit.precision.frameworks import (  # noqa: E402
    PADDLE_BF16_BLACK,
    PADDLE_BF16_WHITE,
    PADDLE_FP16_BLACK,
    PADDLE_FP16_WHITE,
    PADDLE_STATIC_GRAY,
    paddle_list,
)

KIT = {"float16": (PADDLE_FP16_WHITE, PADDLE_FP16_BLACK), "bfloat16": (PADDLE_BF16_WHITE, PADDLE_BF16_BLACK)}
#: Paddle's EXTRA_BLACK_LIST as the kit expects it (speed, not numerics; left out of the kit's tables)
EXTRA = {"bicubic_interp_v2", "bilinear_interp_v2", "linear_interp_v2", "nearest_interp_v2", "trilinear_interp_v2",
         "lookup_table", "lookup_table_v2", "scatter"}


def test_the_installed_paddle_is_the_version_the_tables_were_read_from():
    assert paddle.__version__ == "3.3.1"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("level", ["OD", "O1", "O2"])
def test_white_lists_are_identical(dtype, level):
    assert set(paddle.amp.white_list()[dtype][level]) == KIT[dtype][0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_o1_black_list_is_the_kits_plus_the_extra_speed_list(dtype):
    real = set(paddle.amp.black_list()[dtype]["O1"])
    kit = KIT[dtype][1]
    assert kit <= real and real - kit == EXTRA == set(amp_lists.EXTRA_BLACK_LIST)
    assert len(real) == 53 and len(kit) == 45


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_o2_black_list_is_only_the_extra_list(dtype):
    real = set(paddle.amp.black_list()[dtype]["O2"])
    assert real == EXTRA
    assert not real & KIT[dtype][1]            # softmax, layer_norm, log... are NOT kept in fp32 at O2
    assert paddle_list("softmax", dtype) == "black"   # the kit's answer is O1's


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_od_black_list_is_empty(dtype):
    assert set(paddle.amp.black_list()[dtype]["OD"]) == set()


def test_kits_lists_are_the_named_sets_of_amp_lists():
    """The named sets in amp_lists.py, one to one (BF16_BLACK_LIST = FP16_BLACK_LIST since Paddle 2.6)."""
    assert set(amp_lists.FP16_WHITE_LIST) == PADDLE_FP16_WHITE and set(amp_lists.BF16_WHITE_LIST) == PADDLE_BF16_WHITE
    assert set(amp_lists.FP16_BLACK_LIST) == PADDLE_FP16_BLACK == set(amp_lists.BF16_BLACK_LIST)


def test_static_gray_list_holds_the_kits_part_of_it():
    real = set(fp16_lists.gray_list)
    assert PADDLE_STATIC_GRAY <= real and len(real) == 46
    assert {"relu", "batch_norm"} <= real      # on neither dynamic list: they follow their inputs
    for op in ("relu", "batch_norm"):
        assert op not in paddle.amp.white_list()["float16"]["O1"] | paddle.amp.black_list()["float16"]["O1"]


def test_layer_norm_is_black_and_relu_batch_norm_are_on_no_list():
    """#39: notebook 09 once said Paddle's dynamic lists leave layer_norm gray; it is on ``FP16_BLACK_LIST`` (so
    black at O1 for both dtypes). The static graph's gray list also names it, but the static black list (the same
    ``FP16_BLACK_LIST``) holds it too and is asked first (``fp16_utils.op_need_keep_fp32``); relu and batch_norm are
    on the gray list only — the claim "relu white, batch_norm black" is wrong in both graphs."""
    for dt in ("float16", "bfloat16"):
        assert "layer_norm" in paddle.amp.black_list()[dt]["O1"]
        assert not {"relu", "batch_norm"} & (paddle.amp.white_list()[dt]["O1"] | paddle.amp.black_list()[dt]["O1"])
    lists = fp16_lists.AutoMixedPrecisionLists()
    assert "layer_norm" in lists.gray_list and "layer_norm" in lists.black_list
    assert set(fp16_lists.gray_list) & set(amp_lists.FP16_BLACK_LIST) == {"layer_norm"}
    assert {"relu", "batch_norm"} <= lists.gray_list and not {"relu", "batch_norm"} & lists.black_list
