"""Load Transformer Engine's pure-PyTorch NVFP4 reference quantizers (vendored verbatim beside this file) on a CPU.

The two files import a few names from ``transformer_engine.pytorch`` (a base class, an enum, small helpers) that
need the CUDA build; :func:`te_reference` puts minimal stand-ins for exactly those names into ``sys.modules`` under
private module names, loads the vendored file, and takes the stand-ins out again. The quantizer's own arithmetic
(``_quantize``, ``_quantize_blockwise_reference``, ``_apply_rht``, ``cast_to_fp4x2``, ``cast_from_fp4x2``,
``get_wgrad_sign_vector``) runs as written: nothing of it is stubbed.
"""
from __future__ import annotations

import enum
import importlib.util
import sys
import types
from functools import lru_cache
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
#: tag -> vendored file (the tag where the reference first appears, and the latest tag read)
FILES = {"v2.8": HERE / "v2_8_quantization_microblock_ref.py", "v2.18": HERE / "v2_18_quantization_ref_nvfp4.py"}
#: tag -> the file's git blob id at that tag in NVIDIA/TransformerEngine (``git rev-parse <tag>:<path>``): the
#: vendored text below its provenance header must hash to it (tests/test_fp8_nvfp4_refs.py), so it stays verbatim
BLOBS = {"v2.8": "da749d237ffa53cd18fe7c98d0e0cc8b68c0f636", "v2.18": "d09b95ace3571f703bf2f80a78e715d5898ac154"}


def vendored_blob(tag: str) -> str:
    """The git blob id of the vendored file's text after its provenance header (up to the first blank line)."""
    import hashlib

    data = FILES[tag].read_bytes()
    body = data[data.index(b"\n\n") + 2:]
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()


class _Quantizer:
    def __init__(self, *, rowwise: bool = True, columnwise: bool = True):
        self.rowwise_usage = rowwise
        self.columnwise_usage = columnwise


class _QuantizedTensor:
    pass


class _GEMMType(enum.Enum):
    FPROP = "fprop"
    DGRAD = "dgrad"
    WGRAD = "wgrad"


class _Fp4Formats(enum.Enum):
    E2M1 = "e2m1"


def _stubs(tag: str) -> dict[str, types.ModuleType]:
    utils = types.ModuleType("te_stub_utils")
    utils.Fp4Formats = _Fp4Formats  # type: ignore[attr-defined]
    utils.HIGH_PRECISION_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # type: ignore[attr-defined]
    utils.roundup_div = lambda a, b: (a + b - 1) // b  # type: ignore[attr-defined]
    quant = types.ModuleType("te_stub_quantization")
    quant.ExperimentalQuantizedTensor = _QuantizedTensor  # type: ignore[attr-defined]
    quant.ExperimentalQuantizer = _Quantizer  # type: ignore[attr-defined]
    quant.MMParams = object  # type: ignore[attr-defined]
    quant.GEMMType = _GEMMType  # type: ignore[attr-defined]
    qt = types.ModuleType("te_stub_quantized_tensor")
    qt.QuantizedTensorStorage = _QuantizedTensor  # type: ignore[attr-defined]
    qt.Quantizer = _Quantizer  # type: ignore[attr-defined]
    pkg = "transformer_engine.pytorch." + ("experimental" if tag == "v2.8" else "custom_recipes")
    mods = {"transformer_engine": types.ModuleType("transformer_engine"),
            "transformer_engine.pytorch": types.ModuleType("transformer_engine.pytorch"),
            pkg: types.ModuleType(pkg), pkg + ".quantization": quant, pkg + ".utils": utils,
            "transformer_engine.pytorch.quantized_tensor": qt}
    mods[pkg].quantization = quant  # type: ignore[attr-defined]
    mods[pkg].utils = utils  # type: ignore[attr-defined]
    return mods


@lru_cache(maxsize=None)
def te_reference(tag: str) -> types.ModuleType:
    """The vendored reference module of ``tag`` ("v2.8" or "v2.18"), loaded with its imports stubbed."""
    stubs = _stubs(tag)
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    try:
        spec = importlib.util.spec_from_file_location(f"te_reference_{tag.replace('.', '_')}", FILES[tag])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module


def te_quantize(x: torch.Tensor, tag: str, tile: tuple[int, int] = (1, 16), rht: bool = False,
                columnwise: bool = False):
    """``(codes packed two per byte, e4m3 scales, amax_row, codes_t, scales_t, amax_col)`` from the reference's
    ``NVFP4QuantizerRef._quantize`` (codes_t etc. None unless ``columnwise``)."""
    mod = te_reference(tag)
    q = mod.NVFP4QuantizerRef(dtype=_Fp4Formats.E2M1, rowwise=True, columnwise=columnwise,
                              quant_tile_shape=tile, with_rht=rht)
    qx, sx, qx_t, sx_t, amax_row, amax_col = q._quantize(x)
    return qx, sx, amax_row, qx_t, sx_t, amax_col
