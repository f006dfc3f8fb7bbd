"""What a CUDA GPU should give, written down from the README and torch's sources, not from ampkit's own code.

Pure facts and small functions (no GPU needed): the tests in tests/gpu compare the kit's decisions on a real GPU
with these, and tests/test_make_gpu.py checks them on the CPU.

>>> expected_tensor_cores((7, 5))
('float16',)
>>> expected_fast_dtype((9, 0)), expected_fast_dtype((6, 1))
('bfloat16', None)
"""
from __future__ import annotations

#: compute capability -> architecture, for the GPUs the README's rule is about (NVIDIA's CUDA GPUs table).
ARCHITECTURES: dict[tuple[int, int], str] = {
    (6, 0): "Pascal", (6, 1): "Pascal", (7, 0): "Volta", (7, 2): "Volta", (7, 5): "Turing",
    (8, 0): "Ampere", (8, 6): "Ampere", (8, 7): "Ampere", (8, 9): "Ada Lovelace", (9, 0): "Hopper",
    (10, 0): "Blackwell", (12, 0): "Blackwell",
}
#: The README ("Hardware"): fp16 tensor cores came with Volta (7.0), bf16 ones with Ampere (8.0); Pascal (6.x) has
#: none and Turing (7.5) has them for fp16 only. Later architectures keep both.
TENSOR_CORE_DTYPES: dict[str, tuple[str, ...]] = {
    "Pascal": (), "Volta": ("float16",), "Turing": ("float16",), "Ampere": ("bfloat16", "float16"),
    "Ada Lovelace": ("bfloat16", "float16"), "Hopper": ("bfloat16", "float16"), "Blackwell": ("bfloat16", "float16"),
}
#: torch._scaled_mm (fp8 x fp8) runs on CUDA from compute capability 8.9 (Ada) on: "torch._scaled_mm is only
#: supported on CUDA devices with compute capability >= 9.0 or 8.9, or ROCm MI300+"
#: (pytorch, aten/src/ATen/native/cuda/Blas.cpp).
SCALED_MM_FROM = (8, 9)


def _check_capability(capability: tuple[int, int]) -> tuple[int, int]:
    cap = tuple(capability)
    if len(cap) != 2 or not all(isinstance(x, int) and x >= 0 for x in cap):
        raise ValueError(f"capability must be (major, minor), two non-negative ints such as (8, 0); got {capability!r}")
    return cap  # type: ignore[return-value]


def expected_tensor_cores(capability: tuple[int, int]) -> tuple[str, ...]:
    """The tensor-core dtypes (sorted names) the README promises for this compute capability.

    A capability missing from :data:`ARCHITECTURES` takes its major version's family, else the newest known one.

    >>> expected_tensor_cores((6, 1)), expected_tensor_cores((8, 6))
    ((), ('bfloat16', 'float16'))
    """
    cap = _check_capability(capability)
    arch = ARCHITECTURES.get(cap)
    if arch is None:
        same_major = [a for (major, _), a in ARCHITECTURES.items() if major == cap[0]]
        older = [a for c, a in sorted(ARCHITECTURES.items()) if c <= cap]
        arch = (same_major or older or ["Pascal"])[-1]
    return TENSOR_CORE_DTYPES[arch]


def expected_fast_dtype(capability: tuple[int, int]) -> str | None:
    """The low dtype the kit should prefer on this GPU: bf16 where it has bf16 tensor cores, else fp16, else None.

    >>> expected_fast_dtype((7, 0))
    'float16'
    """
    cores = expected_tensor_cores(capability)
    return "bfloat16" if "bfloat16" in cores else "float16" if "float16" in cores else None


def expected_scaled_mm(capability: tuple[int, int]) -> bool:
    """Whether ``torch._scaled_mm`` should run on a CUDA (not ROCm) GPU of this compute capability.

    >>> expected_scaled_mm((8, 6)), expected_scaled_mm((8, 9))
    (False, True)
    """
    return _check_capability(capability) >= SCALED_MM_FROM
