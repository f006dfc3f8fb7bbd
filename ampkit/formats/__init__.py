"""Floating-point formats as the ML frameworks store them: fp32, fp16, bf16, fp8.

Taught in notebook ``01_fp16_range.ipynb`` (and previewed in ``00_start_here.ipynb``).

Everything here is derived from torch itself (``torch.finfo``, bit patterns, torch's own casts), never typed in.
One file per idea; import the names from ``ampkit.formats``:

============  =======================================================================================================
module        holds
============  =======================================================================================================
``registry``  :data:`FORMATS`, :func:`resolve_format`, :func:`format_name`, :func:`info` (a format's layout and
              limits: bits, bias, max, smallest normal/subnormal, eps, has-inf) and :class:`FormatInfo`;
              :data:`FP16_MAX`
``rounding``  :func:`round_trip`, :func:`compare_formats` (:class:`RoundTrip`: stored value, error, verdict),
              :func:`explain` (the same in plain words), :func:`ulp`, :func:`accumulate` (a sum rounded at every
              step), :func:`to_fp32` (the kit's one float32 rounding, used by the scalers and the fp8 recipes)
``bits``      :func:`decompose` / :func:`from_bits` / :func:`toggle_bit`: one number as stored (sign, exponent and
              mantissa bits, kind, stored value, rounding error, ulp and the neighbouring representable values)
``bands``     :func:`classify` (vectorised: what fraction of a tensor would flush to zero, turn subnormal, stay
              normal or overflow when cast; used on scaled gradients by ``ampkit.scaling``),
              :func:`classify_codes`, :func:`range_bands` (the same bands as intervals of log2|x|, for the range map)
``parse``     :func:`parse_value`: a number typed by a learner
``e2m1``      E2M1, the 4-bit float of MXFP4/NVFP4 (no torch cast on a CPU): :func:`e2m1_encode` (ties to even,
              saturating), :func:`e2m1_decode`, :func:`pack_e2m1`; reachable by name (``info("e2m1")``), not in
              :data:`FORMATS` (taught in ``10_fp4.ipynb``)
============  =======================================================================================================

The widgets over them are :class:`ampkit.widgets.FloatExplorer` and :class:`ampkit.widgets.RangeMap`.

Two facts about torch 2.x's casts that the kit reports rather than hides (checked in the tests):

- a Python float (float64) is converted to fp16/bf16/fp8 *through float32*, so it can be rounded twice
  (``1 + 2**-11 + 2**-40`` becomes ``1.0`` in fp16, where one correct rounding would give ``1 + 2**-10``);
- casts to ``float8_e4m3fn`` *saturate* on CPU: ``1000.0`` and even ``inf`` become ``448.0`` (e4m3fn has no inf);
  ``float8_e5m2`` overflows to ``inf`` like fp16.

>>> round_trip(0.1, "fp16")
0.0999755859375
>>> info("fp16").max
65504.0
"""
from __future__ import annotations

from ampkit.formats.bands import CLASSES, Classification, RangeBands, classify, classify_codes, range_bands
from ampkit.formats.bits import PATTERN_KINDS, Decomposition, decompose, from_bits, toggle_bit
from ampkit.formats.e2m1 import (
    E2M1,
    E2M1_MAX,
    E2M1_MIDPOINTS,
    E2M1_SATURATION,
    E2M1_VALUES,
    e2m1_decode,
    e2m1_encode,
    e2m1_neighbours,
    e2m1_round,
    e2m1_step,
    pack_e2m1,
    unpack_e2m1,
)
from ampkit.formats.parse import parse_value
from ampkit.formats.registry import (
    BY_NAME_ONLY,
    FORMATS,
    FP16_MAX,
    FP16_TINY,
    FP32_MAX,
    FormatInfo,
    format_name,
    info,
    resolve_format,
)
from ampkit.formats.rounding import RoundTrip, accumulate, compare_formats, explain, round_trip, to_fp32, ulp

__all__ = [
    "FORMATS", "resolve_format", "format_name", "round_trip", "RoundTrip", "compare_formats",
    "FormatInfo", "info", "Classification", "classify", "classify_codes", "PATTERN_KINDS", "CLASSES",
    "Decomposition", "decompose", "from_bits", "toggle_bit", "ulp", "accumulate", "range_bands",
    "RangeBands", "parse_value", "explain", "FP16_MAX", "FP16_TINY", "FP32_MAX", "to_fp32",
    "E2M1", "E2M1_MAX", "E2M1_VALUES", "E2M1_MIDPOINTS", "E2M1_SATURATION", "e2m1_encode", "e2m1_decode",
    "e2m1_round", "e2m1_neighbours", "e2m1_step", "pack_e2m1", "unpack_e2m1", "BY_NAME_ONLY",
]
