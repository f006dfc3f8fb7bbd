"""MX block scaling: every block of 32 consecutive values along the last dimension shares one power-of-two scale
(an E8M0 byte: bias 127, exponents -127 … 127, byte 0xFF = NaN), its elements stored as fp8 (MXFP8 e4m3 / e5m2).
Taught in ``06_fp8_scaling.ipynb``.

Two ways to pick a block's exponent, both implemented here:

``"ocp"``  the OCP Microscaling Formats (MX) v1.0 specification (§6.3): ``e = floor(log2(amax_block)) - emax_elem``
           with ``emax_elem`` the exponent of the element format's largest normal (8 for e4m3, 15 for e5m2). The
           block's largest value lands in the top binade, which can lie *above* ``fp8_max`` (e4m3: 1.75·2**8 = 448,
           but amax/2**e may be up to 2**9): such values saturate to ±fp8_max.
``"te"``   Transformer Engine's MXFP8 (``float_to_e8m0(amax_block * fp32(1 / fp8_max))`` in
           ``transformer_engine/common/util/ptx.cuh`` at TE 2.18, ``ptx_arch_spec.cuh`` on main): the exponent of the
           fp32 product, rounded *up* when it is not an exact power of two, so ``amax_block / 2**e <= fp8_max`` and
           nothing saturates (at the cost of up to one binade of resolution for small values). A product that
           underflows fp32 to 0 gets byte 0x00, exponent -127.

Both rules clamp the exponent to E8M0's range [-127, 127]; an all-zero block gets -127 (TE: byte 0x00; the spec's
``log2(0)`` is below every exponent). A block holding inf or NaN has no valid scale: its E8M0 byte is the NaN code
0xFF (:func:`e8m0_encode`) and it decodes to NaN, as in Microsoft's MX emulation library (``microsoft/microxcaling``,
``mx/mx_ops.py``: an inf or NaN block amax gives a NaN scale); in the int exponents such a block is reported as 127
and flagged in ``nonfinite_blocks``. (TE's own kernel does not do this: it skips NaN in the block amax and gives an
inf amax the byte 0xFE.) The block size must divide the last dimension (no padding).

>>> x = torch.tensor([[500.0] + [1.0] * 31])
>>> mx_exponents(x, "e4m3", rounding="ocp").tolist(), mx_exponents(x, "e4m3", rounding="te").tolist()
([[0]], [[1]])
>>> mx_fake_quantize(x, "e4m3", rounding="ocp")[0, 0].item(), mx_fake_quantize(x, "e4m3", rounding="te")[0, 0].item()
(448.0, 512.0)
>>> q, e, bad = mx_quantize(torch.tensor([[1e-44] * 32, [float("inf")] * 32]), rounding="te")
>>> e.tolist(), e8m0_encode(e, bad).tolist()
([[-127], [127]], [[0], [255]])

MXFP4 is the same rule with E2M1 elements (``fmt="e2m1"``, taught in ``10_fp4.ipynb``): ``emax_elem`` is 2
(6 = 1.5·2**2) and the elements are E2M1 codes (uint8, :mod:`ampkit.formats.e2m1`). The other scale rules a reader
meets, as torchao's ``ScaleCalculationMode`` names them (``torchao/prototype/mx_formats/config.py`` at 0.18), each
exact here from the fp32 bits (torchao's RCEIL calls ``torch.log2``; the kit never does):

``"floor"``  torchao's FLOOR: the OCP rule (another name for ``"ocp"``).
``"ceil"``   ``ceil(log2(amax)) - emax_elem``: the block's amax never lands above the top binade, so nothing
             saturates, but a block whose amax is just above a power of two loses a binade for its small values.
``"even"``   round amax to ``mbits`` mantissa bits first (a significand of at least ``2 - 2**-(mbits+1)`` rounds
             up to the next power of two), then FLOOR: saturates less than FLOOR, flushes less than CEIL.
``"rceil"``  ``ceil(log2(fp32(amax / elem_max)))``: the smallest power of two that brings the block's amax
             within the element's max (cuBLAS's rule for UE8M0 scales, torchao's RCEIL, and Transformer Engine's
             reference quantizer for MXFP4, ``cast_to_e8(vec_max / 6)``). For e2m1 ``"te"`` is this rule.

==========  =======================================================================================================
module      what it holds
==========  =======================================================================================================
``rule``    the rule above: exponents, E8M0 bytes, quantize / dequantize, :func:`mx_report`
``ranges``  what a block holds under each rule: :class:`BlockRange`, :func:`block_range` (notebook 10)
==========  =======================================================================================================
"""
from __future__ import annotations

import torch  # noqa: F401  (the examples above use it)

from ampkit.fp8.mx.ranges import BlockRange, block_range
from ampkit.fp8.mx.rule import (
    E8M0_BIAS,
    E8M0_MAX,
    E8M0_MIN,
    E8M0_NAN,
    ELEMENTS,
    MX_BLOCK,
    ROUNDINGS,
    SCALE_RULES,
    MXReport,
    check_block,
    e8m0_decode,
    e8m0_encode,
    elem_max,
    elem_name,
    emax_elem,
    mx_dequantize,
    mx_exponents,
    mx_fake_quantize,
    mx_quantize,
    mx_report,
    pow2,
)

__all__ = ["ROUNDINGS", "SCALE_RULES", "ELEMENTS", "elem_name", "elem_max", "MX_BLOCK", "E8M0_MIN", "E8M0_MAX",
           "E8M0_BIAS", "E8M0_NAN", "emax_elem", "mx_exponents", "mx_quantize", "mx_dequantize", "mx_fake_quantize",
           "MXReport", "mx_report", "BlockRange", "block_range", "pow2", "check_block", "e8m0_encode", "e8m0_decode"]
