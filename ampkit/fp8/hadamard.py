"""The random Hadamard transform (RHT) of the NVFP4 recipe: 16×16, a fixed sign vector. Taught in ``10_fp4.ipynb``.

A Hadamard matrix ``H`` (Sylvester's construction, entries ±1) divided by 4 is orthogonal: ``(H/4)(H/4)ᵀ = I``.
Transformer Engine multiplies each run of 16 consecutive values by ``T = diag(s) · H / 4``, with ``s`` a fixed
sign vector (``get_wgrad_sign_vector`` in its reference quantizer, :data:`TE_SIGNS`). One outlier in a block is
spread over all 16 outputs at a quarter of its size: the block's max-to-RMS ratio falls from up to 4 to about 1
(tested). Whether that lowers a GEMM's quantization error depends
on the data (notebook 10 measures it; on small synthetic gradients it need not). Because ``T Tᵀ = I``, a GEMM
whose two operands are both transformed along the contracted dimension gives the same product: ``(A T)(B T)ᵀ = A Bᵀ``.

Where the recipe applies it (``NVFP4BlockScaling`` at v2.8 … v2.18: "RHT is currently only applied to column-wise
usage so that it can be used for wgrad GEMM"): to the columnwise copies of the layer's input and of the output
gradient — the two operands of the weight-gradient GEMM ``dW = dYᵀ X``, both transformed along the tokens — not
to the weights and not to the forward or data-gradient GEMMs.

The reference multiplies in the input's dtype (bf16 for the recipe's tensors); the kit multiplies in fp32 and
rounds once to the input's dtype. A 16-term sum's rounding depends on the order it is added in, so the tests
compare the kit's transform with the reference's within a bound, never bit for bit.

>>> h = hadamard_matrix(16)
>>> bool(torch.equal(h @ h.T, 16 * torch.eye(16)))
True
>>> x = torch.zeros(1, 16); x[0, 3] = 8.0                     # one outlier ...
>>> rht(x).abs().unique().tolist()                            # ... becomes 16 values of 8/4
[2.0]
"""
from __future__ import annotations

import torch

from ampkit._util import check_int

__all__ = ["RHT_SIZE", "TE_SIGNS", "hadamard_matrix", "rht_matrix", "rht"]

RHT_SIZE = 16
#: Transformer Engine's fixed signs (``get_wgrad_sign_vector``, the same at v2.8 and v2.18)
TE_SIGNS: tuple[float, ...] = (1.0, 1.0, 1.0, -1.0, 1.0, -1.0, -1.0, -1.0,
                               -1.0, -1.0, -1.0, 1.0, -1.0, 1.0, -1.0, -1.0)


def hadamard_matrix(size: int = RHT_SIZE) -> torch.Tensor:
    """Sylvester's Hadamard matrix of a power-of-two ``size`` (fp32, entries ±1).

    >>> hadamard_matrix(2).tolist()
    [[1.0, 1.0], [1.0, -1.0]]
    """
    size = check_int("size", size, minimum=1)
    if size & (size - 1):
        raise ValueError(f"size must be a power of two (2, 4, 8, 16, ...); got {size}")
    h = torch.ones(1, 1)
    while h.shape[0] < size:
        h = torch.cat([torch.cat([h, h], dim=1), torch.cat([h, -h], dim=1)], dim=0)
    return h


def rht_matrix(signs: bool = True) -> torch.Tensor:
    """``T = diag(s) · H / 4`` (fp32, 16×16, exact); ``signs=False`` leaves the signs out (``H / 4``).

    >>> t = rht_matrix(); bool(torch.equal(t @ t.T, torch.eye(16)))
    True
    """
    h = hadamard_matrix(RHT_SIZE)
    if signs:
        h = torch.tensor(TE_SIGNS).unsqueeze(1) * h
    return h * (1.0 / RHT_SIZE ** 0.5)


def rht(x: torch.Tensor, signs: bool = True) -> torch.Tensor:
    """``x`` with every run of 16 values along its last dimension multiplied by :func:`rht_matrix` (fp32 products,
    rounded once to ``x``'s dtype).

    >>> x = torch.randn(4, 32, generator=torch.Generator().manual_seed(0))
    >>> bool(torch.allclose(rht(x).norm(), x.norm()))              # orthogonal: lengths kept
    True
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor")
    if x.dim() == 0 or x.shape[-1] % RHT_SIZE:
        raise ValueError(f"the last dimension must be a multiple of {RHT_SIZE}; got shape {tuple(x.shape)}")
    out = x.float().reshape(-1, RHT_SIZE) @ rht_matrix(signs)
    return out.reshape(x.shape).to(x.dtype)
