"""bf16 weights that stop learning, and the three fixes: fp32 master weights, Kahan summation, stochastic rounding.

Taught in notebook 07 (``07_transformers_in_16_bits.ipynb``, section 5, with the experiments of
:mod:`ampkit.lessons.transformers_in_16_bits.weights`); the fp32 master weights it compares against are the O2 level of
``02_autocast_and_levels.ipynb``.

A bf16 weight keeps 8 significant bits, so its neighbours are ``2**-7`` apart near 1.0. Storing ``w + u`` with
round-to-nearest (what ``p.add_(u)`` does) gives back ``w`` itself whenever ``|u|`` is below half the gap to the
neighbour on ``u``'s side: the update is lost, and many small updates in a row are all lost, so training plateaus.

- :func:`apply_update`: one update of a bf16 tensor, by ``"nearest"`` rounding, by ``"kahan"`` compensated
  summation (a buffer keeps what rounding dropped and adds it back next time; Zamirai et al. 2020) or by
  ``"stochastic"`` rounding (round up with probability equal to the fraction of the gap; Gupta et al. 2015);
- :func:`stochastic_round` (fp32 to bf16, unbiased) and :func:`nearest_threshold` (the largest lost update);
- :class:`BF16Updates`: wraps any ``torch.optim`` optimizer over bf16 parameters with one of the modes, or
  ``"master"`` (fp32 master weights).

>>> w = torch.ones(1, dtype=torch.bfloat16)
>>> apply_update(w, torch.tensor([1e-3]), "nearest").weight.item()    # 1e-3 < 2**-8: lost
1.0
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ampkit.formats import ulp
from ampkit.i18n import tr

__all__ = ["UPDATE_MODES", "WRAPPER_MODES", "Updated", "apply_update", "stochastic_round", "nearest_threshold",
           "BF16Updates"]

UPDATE_MODES = ("nearest", "kahan", "stochastic")
WRAPPER_MODES = ("nearest", "master", "kahan", "stochastic")


def _check_mode(mode: str, choices: tuple[str, ...]) -> str:
    if mode not in choices:
        raise ValueError(tr("mode must be one of {choices}; got {mode!r}", choices=", ".join(choices), mode=mode))
    return mode


def _check_bf16(t: torch.Tensor, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor; got {type(t).__name__}")
    if t.dtype != torch.bfloat16:
        raise TypeError(f"{what} must be stored in torch.bfloat16; got {t.dtype}")


def stochastic_round(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Round ``x`` (cast to fp32 first) to bf16, up or down at random: up with probability equal to how far ``x``
    lies between its two bf16 neighbours, so ``E[stochastic_round(x)] == x`` exactly for every fp32 ``x``.

    An fp32 number's low 16 bits are exactly what bf16 drops; adding a uniform random 16-bit integer to them and
    truncating carries into the kept bits with probability ``low_bits / 2**16`` (the trick of torchao and
    OneTrainer, written here from that description). inf and NaN pass through unchanged.

    >>> x = torch.full((10000,), 1.0 + 2**-9)             # a quarter of the way from 1.0 to 1.0 + 2**-7
    >>> r = stochastic_round(x, torch.Generator().manual_seed(0))
    >>> sorted(set(r.tolist())), abs((r == 1.0).float().mean().item() - 0.75) < 0.02   # rounds down 3 times in 4
    ([1.0, 1.0078125], True)
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor; got {type(x).__name__}")
    x32 = x.detach().to(torch.float32).contiguous()
    noise = torch.randint(0, 1 << 16, x32.shape, dtype=torch.int32, generator=generator)
    bits = (x32.view(torch.int32) + noise) & -65536        # -65536 == 0xFFFF0000: keep sign, exponent, 7 bits
    out = bits.view(torch.float32)
    out = torch.where(torch.isfinite(x32), out, x32)      # inf/NaN: no noise (it could turn inf into NaN)
    return out.to(torch.bfloat16)


def nearest_threshold(weight: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """Half the gap from each bf16 ``weight`` to its neighbour on ``update``'s side (float64): round-to-nearest
    loses an update smaller than this and keeps one larger. The gap below a power of two is half the gap above,
    so at ``w = 1`` a step down of ``0.003`` is kept while a step up of ``0.003`` is lost.

    >>> w = torch.ones(2, dtype=torch.bfloat16)
    >>> nearest_threshold(w, torch.tensor([1e-3, -1e-3])).tolist()   # 2**-8 up, 2**-9 down
    [0.00390625, 0.001953125]
    """
    _check_bf16(weight, "weight")
    w = weight.detach().to(torch.float64)
    u = torch.broadcast_to(update.detach().to(torch.float64), w.shape)
    tiny = 2.0 ** -133                                     # bf16's smallest subnormal: the gap at 0
    half = torch.where(w == 0, torch.full_like(w, tiny), ulp(w, "bf16")) / 2
    mant, _ = torch.frexp(w.abs())
    toward_zero = (torch.sign(u) != torch.sign(w)) & (w != 0)
    # at a normal power of two (mantissa exactly 0.5) the neighbour toward zero is half as far
    below = toward_zero & (mant == 0.5) & (w.abs() > torch.finfo(torch.bfloat16).smallest_normal)
    return torch.where(below, half / 2, half)


class Updated(NamedTuple):
    """What :func:`apply_update` returns: the new bf16 weight and the new Kahan buffer (``None`` unless Kahan)."""

    weight: torch.Tensor
    compensation: torch.Tensor | None


def apply_update(weight: torch.Tensor, update: torch.Tensor, mode: str = "nearest",
                 compensation: torch.Tensor | None = None,
                 generator: torch.Generator | None = None) -> Updated:
    """Store ``weight + update`` in bf16 by ``mode``; returns new tensors, the inputs are left as they are.

    - ``"nearest"``: ``(weight + update)`` rounded to nearest, even on ties, exactly what ``weight.add_(update)``
      stores;
    - ``"kahan"``: ``y = update + compensation``; ``new = nearest(weight + y)``; the new compensation is
      ``y - (new - weight)``, what rounding dropped, kept in ``compensation``'s dtype (bf16 by default, as in
      Zamirai et al. and optimi; fp32 if you pass an fp32 buffer). ``compensation=None`` starts from zeros;
    - ``"stochastic"``: ``stochastic_round(weight + update)`` drawn from ``generator``.

    The sum ``weight + update`` is formed in fp32 (as ``add_`` does inside), then rounded once.

    >>> w, u = torch.ones(1, dtype=torch.bfloat16), torch.tensor([1e-3])
    >>> c = None
    >>> for _ in range(10):
    ...     w, c = apply_update(w, u, "kahan", c)
    >>> w.item(), round(w.item() + c.item(), 4)          # 1 + 10 * 1e-3, held by the weight and its buffer
    (1.0078125, 1.01)
    """
    _check_mode(mode, UPDATE_MODES)
    _check_bf16(weight, "weight")
    if not isinstance(update, torch.Tensor):
        raise TypeError(f"update must be a torch.Tensor; got {type(update).__name__}")
    w32 = weight.detach().to(torch.float32)
    u32 = update.detach().to(torch.float32)
    if mode == "nearest":
        return Updated((w32 + u32).to(torch.bfloat16), None)
    if mode == "stochastic":
        return Updated(stochastic_round(w32 + u32, generator), None)
    if compensation is None:
        compensation = torch.zeros_like(weight)
    elif compensation.dtype not in (torch.bfloat16, torch.float32):
        raise TypeError(f"compensation must be torch.bfloat16 or torch.float32; got {compensation.dtype}")
    y = u32 + compensation.detach().to(torch.float32)
    new = (w32 + y).to(torch.bfloat16)
    kept = new.to(torch.float32) - w32                     # exact: two nearby bf16 numbers differ by an fp32
    return Updated(new, (y - kept).to(compensation.dtype))


class BF16Updates:
    """Wrap ``optimizer`` (any ``torch.optim.Optimizer`` over bf16 parameters) so that each step's update is
    stored by ``mode``: ``"nearest"`` (plain bf16, updates can be lost), ``"master"`` (an fp32 master copy of
    each weight is updated and rounded to bf16 after every step: 02's O2), ``"kahan"`` or ``"stochastic"``.

    How: for the inner step each parameter is swapped, for that step only, to an exact fp32 copy (the master
    copy in ``"master"``) with an fp32 gradient; the inner optimizer computes its update in fp32 and its state
    (momentum, Adam's moments) is therefore fp32, kept by the inner optimizer as usual. The difference it made
    is then stored in the bf16 weight by :func:`apply_update`. Parameters that are not bf16 are refused
    (TypeError): an fp32 parameter loses no update and needs no wrapper.

    >>> p = torch.nn.Parameter(torch.ones(3, dtype=torch.bfloat16))
    >>> opt = BF16Updates(torch.optim.SGD([p], lr=1e-3), mode="kahan")
    >>> for _ in range(10):
    ...     p.grad = torch.ones_like(p); opt.step()
    >>> p.dtype, p.tolist()          # nearest would have left 1.0 (1e-3 < 2**-9); 0.99 rounds to 0.98828125
    (torch.bfloat16, [0.98828125, 0.98828125, 0.98828125])
    >>> round(p[0].item() + opt.compensation[p][0].item(), 4)             # and the buffer holds the rest
    0.99
    """

    def __init__(self, optimizer: torch.optim.Optimizer, mode: str = "nearest", seed: int = 0,
                 compensation_dtype: torch.dtype = torch.bfloat16) -> None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer; got {type(optimizer).__name__}")
        self.mode = _check_mode(mode, WRAPPER_MODES)
        if compensation_dtype not in (torch.bfloat16, torch.float32):
            raise TypeError(f"compensation_dtype must be torch.bfloat16 or torch.float32; got {compensation_dtype}")
        for gi, group in enumerate(optimizer.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.dtype != torch.bfloat16:
                    raise TypeError(tr("BF16Updates needs parameters stored in torch.bfloat16; parameter {pi} of "
                                       "group {gi} is {dtype} (an fp32 parameter loses no update: use the "
                                       "optimizer alone, or cast the model with .to(torch.bfloat16))", pi=pi, gi=gi,
                                       dtype=p.dtype))
        self.optimizer = optimizer
        self.compensation_dtype = compensation_dtype
        self.generator = torch.Generator().manual_seed(seed)
        self.master: dict[torch.Tensor, torch.Tensor] = {}        # fp32 master copies ("master")
        self.compensation: dict[torch.Tensor, torch.Tensor] = {}  # Kahan buffers ("kahan")

    @property
    def param_groups(self) -> list[dict]:
        """The inner optimizer's parameter groups (so a learning-rate scheduler can change ``lr``)."""
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The inner optimizer's ``zero_grad``."""
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        """One inner step, each update stored in bf16 by ``mode``."""
        params = [p for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]
        saved = []
        with torch.no_grad():
            for p in params:
                grad, old = p.grad, p.data
                if self.mode == "master":
                    start = self.master.setdefault(p, old.to(torch.float32))
                else:
                    start = old.to(torch.float32)
                p.grad = None
                p.data = start
                p.grad = grad.to(torch.float32)
                saved.append((p, grad, old, start.clone() if self.mode != "master" else None))
            try:
                self.optimizer.step()
            finally:
                for p, grad, old, before in saved:
                    new32 = p.data
                    p.grad = None
                    if self.mode == "master":
                        p.data = new32.to(torch.bfloat16)
                    else:
                        p.data = self._store(p, old, new32 - before)
                    p.grad = grad

    def _store(self, p: torch.Tensor, old: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        comp = None
        if self.mode == "kahan":
            comp = self.compensation.setdefault(p, torch.zeros_like(old, dtype=self.compensation_dtype))
        new, comp = apply_update(old, update, self.mode, comp, self.generator)
        if comp is not None:
            self.compensation[p] = comp
        return new

    def state_dict(self) -> dict:
        """The inner optimizer's state dict (the wrapper's own buffers are not in it)."""
        return self.optimizer.state_dict()
