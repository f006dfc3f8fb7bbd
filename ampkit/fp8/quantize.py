"""Per-tensor fp8 scaling: one fp32 scale per tensor, quantize = cast ``x * scale`` to e4m3 / e5m2, dequantize = cast
back and multiply by ``scale_inv = fp32(1 / scale)``. Taught in ``06_fp8_scaling.ipynb``.

Every rule follows Transformer Engine (TE; read at its release tag v2.18 and on main, 2.20.0.dev0, and the same in
TE 1.7's cast and dequantize kernels; sources in ``docs/reference.md``):

- **amax** (:func:`amax_of`): the largest ``|x|``, as TE's cast and amax kernels compute it with ``fmaxf``: an
  element ±inf makes the amax inf; NaN elements are skipped (``fmaxf`` returns the other operand); an empty or
  all-NaN tensor has amax 0.
- **scale** (:func:`compute_scale`): the amax is mapped to ``fp8_max * 2**-margin``, so
  ``scale = fp8_max * 2**-margin / amax`` in fp32 (``delayed_scaling.cu``). An amax of 0, inf or NaN gives no
  information: the previous scale is kept (``previous``; 1.0 for current scaling, as ``compute_scale_from_amax``
  returns). A scale that overflows fp32 (a tiny amax) becomes fp32's largest finite value. A NaN scale never comes out.
- **quantize**: the fp32 product ``x * scale`` cast with torch's round-to-nearest-even. With ``saturate=True`` (the
  default, as TE casts) values beyond ``±fp8_max`` become ``±fp8_max`` in both formats; with ``saturate=False``
  torch's raw cast decides (torch 2.13 on CPU saturates e4m3fn but turns e5m2 overflow into ``inf``).
- **dequantize**: ``q * scale_inv`` with ``scale_inv = fp32(1 / scale)``, the value TE stores beside the fp8 data
  (``reciprocal`` in ``quantize_fp8.cuh``; ``dequantize_func`` in ``dequantize_fp8.cuh``). For a scale that is not
  a power of two this differs from ``q / scale`` by one fp32 ulp on some elements (up to about half of them).

Scales, amaxes and products are fp32, as TE keeps them.

>>> compute_scale(224.0, "e4m3"), compute_scale(224.0, "e4m3", margin=1), compute_scale(0.0, "e4m3")
(2.0, 1.0, 1.0)
>>> amax_of(torch.tensor([1.0, float("nan"), -3.0])), amax_of(torch.tensor([1.0, float("-inf")]))
(3.0, inf)
>>> x = torch.tensor([0.0009, 1.0, 300.0])
>>> dequantize(quantize(x, 1.0, "e4m3"), 1.0).tolist()
[0.0, 1.0, 288.0]
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from ampkit._util import check_int
from ampkit.dtypes import short_name
from ampkit.formats import FP32_MAX, resolve_format, to_fp32
from ampkit.i18n import tr

__all__ = ["FP8_FORMATS", "fp8_dtype", "fp8_name", "fp8_max", "fp8_min_subnormal", "compute_scale", "amax_of",
           "one_number", "quantize", "dequantize", "fake_quantize", "saturation_threshold", "fp8_to_float",
           "QuantReport", "quant_report", "current_scale", "scale_inv", "to_fp32"]

#: The two fp8 formats, by the kit's short name.
FP8_FORMATS: dict[str, torch.dtype] = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def fp8_name(fmt: str | torch.dtype) -> str:
    """``"e4m3"`` or ``"e5m2"`` for any accepted spelling (``"float8_e4m3fn"``, ``torch.float8_e5m2``...).

    >>> fp8_name(torch.float8_e4m3fn), fp8_name("E5M2")
    ('e4m3', 'e5m2')
    """
    if not isinstance(fmt, (str, torch.dtype)):
        raise TypeError(tr("an fp8 format is 'e4m3' or 'e5m2' (or a torch float8 dtype); got {type}",
                           type=type(fmt).__name__))
    try:                                     # the kit's one name map (ampkit.formats, ampkit.dtypes)
        name = short_name(resolve_format(fmt))
    except ValueError:
        name = None
    if name not in FP8_FORMATS:
        shown = fmt if isinstance(fmt, torch.dtype) else repr(fmt)
        raise ValueError(tr("unknown fp8 format {fmt}; valid: 'e4m3' (torch.float8_e4m3fn), 'e5m2' "
                            "(torch.float8_e5m2)", fmt=shown))
    return name


def fp8_dtype(fmt: str | torch.dtype) -> torch.dtype:
    """The torch dtype of an fp8 format name.

    >>> fp8_dtype("e4m3"), fp8_dtype("float8_e5m2")
    (torch.float8_e4m3fn, torch.float8_e5m2)
    """
    return FP8_FORMATS[fp8_name(fmt)]


def fp8_max(fmt: str | torch.dtype) -> float:
    """Largest finite value: 448 (e4m3), 57344 (e5m2), read from ``torch.finfo``.

    >>> fp8_max("e4m3"), fp8_max("e5m2")
    (448.0, 57344.0)
    """
    return float(torch.finfo(fp8_dtype(fmt)).max)


def fp8_min_subnormal(fmt: str | torch.dtype) -> float:
    """Smallest positive (subnormal) value: 2**-9 (e4m3), 2**-16 (e5m2), read from torch's own bit pattern 0x01.

    >>> fp8_min_subnormal("e4m3") == 2**-9, fp8_min_subnormal("e5m2") == 2**-16     # e5m2 reaches 128x smaller
    (True, True)
    """
    return float(torch.tensor([1], dtype=torch.uint8).view(fp8_dtype(fmt)).float())


def saturation_threshold(fmt: str | torch.dtype) -> tuple[float, bool]:
    """``(t, inclusive)``: a magnitude ``|x * scale|`` above ``t`` (or equal, when ``inclusive``) rounds beyond
    ``fp8_max`` — it would need a larger number than the format has, so it saturates (or overflows to inf in e5m2
    without saturation). ``t = fp8_max + ulp/2``: 464 for e4m3 (a tie rounds to even 448: not inclusive), 61440 for
    e5m2 (a tie rounds up: inclusive) — the very point where torch's e5m2 cast turns to inf.

    >>> saturation_threshold("e4m3"), saturation_threshold("e5m2")
    ((464.0, False), (61440.0, True))
    """
    m = fp8_max(fmt)
    bits = int(torch.tensor([m]).to(fp8_dtype(fmt)).view(torch.uint8))
    below = float(torch.tensor([bits - 1], dtype=torch.uint8).view(fp8_dtype(fmt)).float())
    return m + (m - below) / 2, bool(bits & 1)


def saturates(magnitude: torch.Tensor, fmt: str | torch.dtype) -> torch.Tensor:
    """Where ``magnitude`` (``|x * scale|``, the scaled values' sizes) rounds beyond ``fmt``'s largest value: above
    :func:`saturation_threshold` (e4m3: > 464; e5m2: >= 61440, a tie there rounds up). The one saturation test of
    the kit: per-tensor scaling, tiles, MX blocks and the block comparisons all count with it.

    >>> saturates(torch.tensor([448.0, 464.0, 465.0]), "e4m3").tolist()
    [False, False, True]
    >>> saturates(torch.tensor([57344.0, 61440.0]), "e5m2").tolist()
    [False, True]
    """
    t, inclusive = saturation_threshold(fmt)
    return magnitude >= t if inclusive else magnitude > t


def check_margin(margin) -> int:
    """``margin`` as an int ≥ 0 (Transformer Engine's margin is an exponent: the scale is divided by 2**margin)."""
    return check_int("margin", margin, minimum=0)


def one_number(value, want: str) -> float:
    """``value`` (a real number or a one-element tensor) as a Python float; ``want`` says what was expected and
    starts both errors (TypeError for a non-number, ValueError for a tensor of several elements).

    >>> one_number(torch.tensor([2.5]), "amax must be a number")
    2.5
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{want} (a tensor with one element); got shape {tuple(value.shape)}")
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{want}; got {type(value).__name__} {value!r}")
    return float(value)


def compute_scale(amax: float | torch.Tensor, fmt: str | torch.dtype = "e4m3", margin: int = 0,
                  previous: float = 1.0) -> float:
    """``fp8_max * 2**-margin / amax`` in fp32; ``previous`` when ``amax`` is 0, negative, inf or NaN; fp32's max
    when the quotient overflows. Never NaN, never 0.

    ``amax`` is first rounded to fp32, as TE stores it: an amax above fp32's range is inf (previous scale kept), one
    below half its smallest subnormal is 0 (previous scale kept).

    >>> compute_scale(448.0, "e4m3"), compute_scale(2.0, "e4m3"), compute_scale(float("inf"), "e4m3", previous=8.0)
    (1.0, 224.0, 8.0)
    """
    margin = check_margin(margin)
    previous = check_scale(previous, "previous (the scale to keep)")
    amax = to_fp32(one_number(amax, "amax must be one number"))
    if not (math.isfinite(amax) and amax > 0):
        return previous
    target = torch.tensor(fp8_max(fmt), dtype=torch.float32) * torch.tensor(2.0 ** -margin, dtype=torch.float32)
    scale = float(target / torch.tensor(amax, dtype=torch.float32))
    return FP32_MAX if math.isinf(scale) else scale


def amax_of(x: torch.Tensor) -> float:
    """The largest magnitude in ``x`` as Transformer Engine computes it (``fmaxf(fabsf(v), amax)`` from 0): inf if
    ``x`` holds ±inf, NaN elements skipped, 0.0 for an empty or all-NaN tensor.

    So a tensor with an inf gets amax inf: delayed scaling then keeps its previous scale, current scaling falls back
    to scale 1.0 (:func:`compute_scale`). A NaN alone does not change the amax.

    >>> nan = float("nan")
    >>> amax_of(torch.tensor([0.5, nan, -2.0])), amax_of(torch.tensor([])), amax_of(torch.tensor([nan]))
    (2.0, 0.0, 0.0)
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a tensor; got {type(x).__name__}")
    if x.numel() == 0:
        return 0.0
    a = x.detach().abs().float()
    m = float(a.max())          # the common case: one reduction (max propagates NaN; inf is kept)
    if not math.isnan(m):
        return m
    return float(torch.where(torch.isnan(a), torch.zeros_like(a), a).max())


def check_scale(scale, name: str = "scale") -> float:
    """``scale`` as a positive finite fp32 number (a Python float holding it); TypeError / ValueError otherwise."""
    want = f"{name} must be a positive finite fp32 number (at most {FP32_MAX:.4g}, e.g. 1.0)"
    scale = one_number(scale, want)
    s32 = to_fp32(scale)
    if not (math.isfinite(s32) and s32 > 0):
        shown = "" if s32 == float(scale) or math.isnan(s32) else f" (in fp32: {s32!r})"
        raise ValueError(f"{want}; got {scale!r}{shown}")
    return s32


def scale_inv(scale: float) -> float:
    """``fp32(1 / scale)``: the inverse scale Transformer Engine stores beside fp8 data and dequantizes with.

    >>> scale_inv(4.0), scale_inv(3.0)
    (0.25, 0.3333333432674408)
    """
    s = check_scale(scale)
    return float(torch.tensor(1.0, dtype=torch.float32) / torch.tensor(s, dtype=torch.float32))


def quantize(x: torch.Tensor, scale: float, fmt: str | torch.dtype = "e4m3", saturate: bool = True) -> torch.Tensor:
    """``(x * scale)`` cast to the fp8 dtype (fp32 product, torch's round-to-nearest-even cast; ``scale`` is
    rounded to fp32 first).

    >>> quantize(torch.tensor([0.0009, 1.0, 300.0, 1e6]), 1.0, "e4m3")      # flushed, exact, rounded, saturated
    tensor([  0.,   1., 288., 448.], dtype=torch.float8_e4m3fn)
    >>> quantize(torch.tensor([1e6]), 1.0, "e5m2"), quantize(torch.tensor([1e6]), 1.0, "e5m2", saturate=False)
    (tensor([57344.], dtype=torch.float8_e5m2), tensor([inf], dtype=torch.float8_e5m2))
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a tensor; got {type(x).__name__}")
    dt, scale = fp8_dtype(fmt), check_scale(scale)
    y = x.detach().float() * scale
    if saturate:
        m = fp8_max(fmt)
        y = y.clamp(-m, m)  # NaN stays NaN (clamp propagates it)
    return y.to(dt)


def fp8_to_float(q: torch.Tensor) -> torch.Tensor:
    """``q.float()``, bit for bit, through fp16 bit patterns (torch's own fp8 -> fp32 cast is slow on the CPU).

    e5m2 is the top byte of an fp16. e4m3fn's exponent and mantissa bits, moved to fp16's, give the value times
    2**-8 (bias 15 vs 7; subnormals land on fp16 subnormals the same way); 0x7f / 0xff are NaN.
    Checked against ``q.float()`` on all 256 patterns of both formats (tests/test_fp8_quantize.py).

    >>> q = quantize(torch.tensor([0.3, -2.5, 448.0]), 1.0, "e4m3")
    >>> fp8_to_float(q).tolist(), torch.equal(fp8_to_float(q), q.float())
    ([0.3125, -2.5, 448.0], True)
    """
    b = q.view(torch.uint8).to(torch.int16)
    if q.dtype == torch.float8_e5m2:
        return (b << 8).view(torch.float16).float()
    mag = b & 0x7F
    out = (((b & 0x80) << 8) | (mag << 7)).view(torch.float16).float() * 256.0
    return torch.where(mag == 0x7F, torch.full_like(out, float("nan")), out)


def dequantize(q: torch.Tensor, scale: float) -> torch.Tensor:
    """``q`` (an fp8 tensor) back to fp32, times ``scale_inv = fp32(1 / scale)`` (see :func:`scale_inv`), as
    Transformer Engine dequantizes. For a power-of-two scale this is exactly ``q / scale``; otherwise some elements
    differ from ``q / scale`` by one fp32 ulp.

    >>> q = quantize(torch.tensor([0.1]), 3.0)                 # 0.3 stored as e4m3 0.3125
    >>> dequantize(q, 3.0).item(), (q.float() / 3.0).item()    # times fp32(1/3), not / 3: one ulp apart here
    (0.1041666716337204, 0.1041666641831398)
    """
    if not isinstance(q, torch.Tensor) or q.dtype not in FP8_FORMATS.values():
        got = q.dtype if isinstance(q, torch.Tensor) else type(q).__name__
        raise TypeError(f"q must be a float8_e4m3fn or float8_e5m2 tensor (from quantize); got {got}")
    return fp8_to_float(q) * scale_inv(scale)


def fake_quantize(x: torch.Tensor, scale: float, fmt: str | torch.dtype = "e4m3") -> torch.Tensor:
    """``dequantize(quantize(x))``: what fp8 storage leaves of ``x``, in fp32.

    >>> fake_quantize(torch.tensor([0.1, 0.2, 500.0]), 1.0)    # e4m3 keeps 3 mantissa bits and saturates at 448
    tensor([1.0156e-01, 2.0312e-01, 4.4800e+02])
    >>> fake_quantize(torch.tensor([0.1, 0.2, 500.0]), 0.5)    # a smaller scale makes room for 500
    tensor([1.0156e-01, 2.0312e-01, 5.1200e+02])
    """
    return dequantize(quantize(x, scale, fmt), scale)


@dataclass(frozen=True)
class QuantReport:
    """What one quantization did to a tensor: fractions of its elements (they sum to 1) and the error.

    ``saturated``: finite and ``|x * scale|`` rounds beyond ``fp8_max`` (see :func:`saturation_threshold`: clipped to
    ±fp8_max, or inf in e5m2 without saturation);
    ``flushed``: nonzero but stored as 0; ``kept``: the rest of the finite values (zeros included);
    ``nonfinite``: inf/NaN on input. ``rel_error``: ||x - deq||₂ / ||x||₂ over the finite inputs (0 for all-zero);
    an input that overflowed to inf counts as wholly lost (error = x).
    """

    fmt: str
    scale: float
    saturated: float
    flushed: float
    kept: float
    nonfinite: float
    rel_error: float
    max_abs_error: float


def quant_report(x: torch.Tensor, scale: float, fmt: str | torch.dtype = "e4m3", saturate: bool = True) -> QuantReport:
    """Quantize ``x`` at ``scale`` and count what happened (see :class:`QuantReport`).

    >>> r = quant_report(torch.tensor([1e-4, 1.0, 1000.0, float("inf")]), 1.0, "e4m3")
    >>> r.flushed, r.kept, r.saturated, r.nonfinite                    # fractions of the elements
    (0.25, 0.25, 0.25, 0.25)
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a tensor; got {type(x).__name__}")
    name = fp8_name(fmt)
    scale = check_scale(scale)
    xf = x.detach().float().reshape(-1)
    n = max(xf.numel(), 1)
    deq = dequantize(quantize(xf, scale, name, saturate=saturate), scale)
    finite = torch.isfinite(xf)
    sat = finite & saturates((xf * scale).abs(), name)
    flushed = finite & (xf != 0) & (deq == 0)
    err = torch.where(finite, xf - deq, torch.zeros_like(xf))
    err = torch.where(torch.isfinite(err), err, xf)   # overflowed to inf: the whole value is lost
    norm = float(torch.where(finite, xf, torch.zeros_like(xf)).norm())
    return QuantReport(fmt=name, scale=scale, saturated=int(sat.sum()) / n, flushed=int(flushed.sum()) / n,
                       kept=int((finite & ~sat & ~flushed).sum()) / n, nonfinite=int((~finite).sum()) / n,
                       rel_error=float(err.norm()) / norm if norm > 0 else 0.0,
                       max_abs_error=float(err.abs().max()) if err.numel() else 0.0)


def current_scale(x: torch.Tensor, fmt: str | torch.dtype = "e4m3", margin: int = 0) -> float:
    """Just-in-time ("current") scaling: the scale from this very tensor's amax (one extra pass over the data).

    As Transformer Engine's ``Float8CurrentScaling`` (``compute_scale_from_amax``, ``amax_epsilon=0``, no power-of-two
    rounding): a tensor whose amax is 0 or inf (all zeros, or any ±inf element) gets scale 1.0; NaN elements are
    skipped by the amax. TE's current scaling has no margin; ``margin`` here defaults to 0 (the same rule).

    >>> x = torch.tensor([0.5, -2.0])
    >>> current_scale(x), current_scale(x, "e5m2")       # 448 / 2 and 57344 / 2
    (224.0, 28672.0)
    >>> current_scale(torch.tensor([1.0, float("inf")]))       # an inf tells nothing about the rest: scale 1.0
    1.0
    """
    return compute_scale(amax_of(x), fmt, margin, previous=1.0)
