"""Watch every training step at close to full speed; replay only the step that went inf/NaN, op by op.

Taught in ``05_amp_in_practice.ipynb``. :class:`~ampkit.diagnose.hunter.NonFiniteHunter` checks the output of every
op, which makes a small step several times slower. :func:`watch` wraps your own training step instead: each call
runs the step with nothing installed, then makes one cheap check (loss, gradients, parameters and the scaler's own
found_inf, in one fused ``torch._foreach_norm`` and one device sync). Only a step that failed the check runs a second
time, from the state before it (parameters, gradients, buffers, optimizer state, scaler state, torch's RNG states,
the same inputs), under the hunter, to name the op. The replay runs the same ops on the same values, so the state
after it is the state after one step: one optimizer step, one scaler update. A step that the scaler skipped (normal
now and then with fp16 loss scaling) is recorded and, while replays are left, replayed; nothing is raised.

``snapshot="full"`` (the default) copies parameters, gradients, buffers and optimizer state before every step into
buffers allocated once (``snapshot_bytes`` says how much memory that is). ``snapshot="lazy"`` copies only the RNG
states, buffers and the scaler's few numbers every step; it copies parameters and optimizer state only when the
gradients are inf/NaN just before ``optimizer.step()``. Lazy relies on two things: the step zeroes the gradients
itself, and the parameters change only in ``optimizer.step()``. Its limit: when the optimizer step itself turns
finite gradients into inf/NaN parameters, no copy was kept, so that step is reported without a replay. Python's and
NumPy's random generators are not restored: draw random numbers in the step with torch.

>>> import torch
>>> lin = torch.nn.Linear(2, 1); opt = torch.optim.SGD(lin.parameters(), lr=0.1)
>>> def train_step(x):
...     opt.zero_grad()
...     loss = lin(x).sum()
...     loss.backward()
...     opt.step()
...     return loss
>>> watched = watch(train_step, lin, opt)
>>> _ = watched(torch.ones(1, 2)); watched.findings
[]
>>> _ = watched(torch.full((1, 2), float("inf")))
>>> f = watched.last; f.step, f.seen_in, f.event.phase, f.event.op
(1, ('loss', 'gradients', 'parameters'), 'forward', 'aten.addmm')
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ampkit._util import check_choice, check_int, iter_tensors
from ampkit.diagnose._snapshot import (
    Slots,
    all_finite,
    exactly_finite,
    found_inf_tensors,
    per_optimizer_states,
    restore_object,
    save_object,
)
from ampkit.diagnose.hunter import NonFiniteEvent, NonFiniteHunter
from ampkit.i18n import is_chinese, mark, tr

__all__ = ["watch", "WatchedStep", "StepFinding", "SNAPSHOTS"]

SNAPSHOTS = ("full", "lazy")


@dataclass(frozen=True)
class StepFinding:
    """One watched step that went inf/NaN. ``step``: which call (0 = the first); ``seen_in``: what the cheap check
    saw (``"loss"``, ``"gradients"``, ``"parameters"``, ``"scaler"`` = the scaler found inf, so it skipped the step);
    ``event``: what the op-level replay found (``None`` when the step was not replayed); ``note``: why not."""

    step: int
    seen_in: tuple[str, ...]
    event: NonFiniteEvent | None
    replayed: bool
    note: str = ""

    def describe(self) -> str:
        """One line in the kit's language (``seen_in`` stays English in the data)."""
        seen = ("、" if is_chinese() else ", ").join(tr(_SEEN_IN[s]) if s in _SEEN_IN else s for s in self.seen_in)
        text = tr("step {step}: inf/NaN in {seen}", step=self.step, seen=seen)
        if "scaler" in self.seen_in:
            text += tr(" (the scaler found inf and skipped the step, as loss scaling does on an overflow)")
        if self.event is not None:
            return tr("{text}; replayed op by op: {event}", text=text, event=self.event.describe())
        return tr("{text}; {note}", text=text, note=self.note) if self.note else text


#: the words of ``StepFinding.seen_in``, marked for the catalog (translated where shown)
_SEEN_IN = {"loss": mark("loss"), "gradients": mark("gradients"), "parameters": mark("parameters"),
            "scaler": mark("scaler")}


def _as_optimizers(optimizer: Any) -> list[torch.optim.Optimizer]:
    opts = [] if optimizer is None else (list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer])
    for o in opts:
        if not isinstance(o, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, a list of them, or None; got "
                            f"{type(o).__name__}")
    return opts


class WatchedStep:
    """``WatchedStep(step, model, optimizer=None, scaler=None, snapshot="full", replays=1)``: see :func:`watch`.

    Call it as you would call ``step``. ``findings``: a :class:`StepFinding` per step that went inf/NaN;
    ``last``: the latest call's finding (``None`` when it stayed finite); ``calls``: how many calls so far;
    ``snapshot_bytes``: the memory its copies hold.
    """

    def __init__(self, step: Callable[..., Any], model: nn.Module, optimizer: Any = None, scaler: Any = None, *,
                 snapshot: str = "full", replays: int = 1):
        if not callable(step):
            raise TypeError(f"watch(step, model, ...): step must be a callable running one training step; got "
                            f"{type(step).__name__}")
        if not isinstance(model, nn.Module):
            raise TypeError(f"watch(step, model, ...): model must be an nn.Module; got {type(model).__name__}")
        if scaler is not None and not all(callable(getattr(scaler, c, None)) for c in ("scale", "step", "update")):
            raise TypeError(f"scaler must have GradScaler's calls (scale, step, update), e.g. "
                            f"torch.amp.GradScaler('cpu'), or be None; got {type(scaler).__name__}")
        self.step, self.model, self.optimizers, self.scaler = step, model, _as_optimizers(optimizer), scaler
        self.snapshot = check_choice("snapshot", snapshot, SNAPSHOTS)
        self.replays = check_int("replays", replays, minimum=0)
        self.findings: list[StepFinding] = []
        self.last: StepFinding | None = None
        self.calls = 0
        self._params, self._buffers, self._grads, self._opt = Slots(), Slots(), Slots(), Slots()
        self._restore_rng = True      # tests switch it off to show that the RNG state matters

    # --- what is watched ---------------------------------------------------------------------------------
    def _param_list(self) -> list[torch.Tensor]:
        seen, out = set(), []
        for p in [*self.model.parameters(), *(p for o in self.optimizers for g in o.param_groups for p in g["params"])]:
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    def _opt_tensors(self) -> tuple[list[torch.Tensor], list]:
        """The optimizers' state tensors in one list, and where each came from: per optimizer, ``{param: {key:
        ("t", index) or ("v", value)}}`` and its param groups' settings (lr, ...)."""
        tensors: list[torch.Tensor] = []
        layout = []
        for o in self.optimizers:
            per = {}
            for p, st in o.state.items():
                entries = {}
                for k, v in st.items():
                    if isinstance(v, torch.Tensor):
                        entries[k] = ("t", len(tensors))
                        tensors.append(v)
                    else:
                        entries[k] = ("v", v)
                per[p] = entries
            layout.append((per, [{k: v for k, v in g.items() if k != "params"} for g in o.param_groups]))
        return tensors, layout

    @property
    def snapshot_bytes(self) -> int:
        """Bytes held by the copies kept between steps (parameters, gradients, buffers, optimizer state)."""
        return self._params.nbytes() + self._grads.nbytes() + self._buffers.nbytes() + self._opt.nbytes()

    # --- keep and restore ----------------------------------------------------------------------------------
    def _keep_params(self, keep: dict) -> None:
        self._params.save(keep["params"])
        opt_tensors, keep["opt_layout"] = self._opt_tensors()
        self._opt.save(opt_tensors)
        keep["params_kept"] = True

    def _keep(self) -> dict:
        params = self._param_list()
        keep = {"params": params, "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
                "grad_none": [p.grad is None for p in params], "params_kept": False,
                "scaler": save_object(self.scaler) if self.scaler is not None else None,
                "per_opt": per_optimizer_states(self.scaler) if self.scaler is not None else None}
        self._buffers.save(list(self.model.buffers()))
        if self.snapshot == "full":
            self._grads.save([p.grad for p in params if p.grad is not None])
            self._keep_params(keep)
        return keep

    def _lazy_hook(self, keep: dict) -> Callable:
        def hook(optimizer, args, kwargs):
            if keep.get("checked"):
                return
            keep["checked"] = True   # the first optimizer step of this call: every backward has run
            if not bool(all_finite([p.grad for p in keep["params"] if p.grad is not None])):
                self._keep_params(keep)   # parameters and optimizer state copied only now, only for a bad step
        return hook

    def _restore(self, keep: dict) -> None:
        params = keep["params"]
        with torch.no_grad():
            if keep["params_kept"]:
                torch._foreach_copy_(params, self._params.copies)
                self._restore_optimizers(keep["opt_layout"])
            saved = iter(self._grads.copies)
            for p, none in zip(params, keep["grad_none"]):
                # "full": the gradients as they were; "lazy": None (the step zeroes its gradients itself)
                p.grad = None if none or self.snapshot == "lazy" else next(saved).clone()
            buffers = list(self.model.buffers())
            if buffers:
                torch._foreach_copy_(buffers, self._buffers.copies)
        if self.scaler is not None:
            restore_object(self.scaler, keep["scaler"])
        if self._restore_rng:
            torch.set_rng_state(keep["rng"])
            if keep["cuda_rng"] is not None:
                torch.cuda.set_rng_state_all(keep["cuda_rng"])

    def _restore_optimizers(self, layout: list) -> None:
        copies = self._opt.copies
        for o, (per, groups) in zip(self.optimizers, layout):
            for p in [p for p in o.state if p not in per]:
                del o.state[p]                       # state the step created (Adam's first step)
            for p, entries in per.items():
                st = o.state[p]
                for k in [k for k in st if k not in entries]:
                    del st[k]
                for k, (kind, v) in entries.items():
                    if kind == "v":
                        st[k] = v
                    elif isinstance(st.get(k), torch.Tensor) and st[k].shape == copies[v].shape:
                        st[k].copy_(copies[v])
                    else:
                        st[k] = copies[v].clone()
            for g, saved in zip(o.param_groups, groups):
                g.update(saved)

    # --- the check -----------------------------------------------------------------------------------------
    @staticmethod
    def _scaler_found(keep: dict) -> torch.Tensor | bool:
        """The scaler's own found_inf for this step, read from its per-optimizer record (no sync)."""
        found = found_inf_tensors(keep["per_opt"]) if keep["per_opt"] is not None else []
        if not found:
            return False
        if len(found) == 1:
            return found[0].detach().sum() > 0
        dev = found[0].device
        return torch.stack([t.detach().float().sum().to(dev) for t in found]).sum() > 0

    def _sources(self, out: Any, keep: dict) -> tuple[str, ...]:
        params = keep["params"]
        groups = {"loss": [t.detach() for t in iter_tensors(out)],
                  "gradients": [p.grad for p in params if p.grad is not None], "parameters": params}
        seen = [name for name, ts in groups.items() if not exactly_finite(ts)]
        return (*seen, "scaler") if bool(self._scaler_found(keep)) else tuple(seen)

    def _is_bad(self, out: Any, keep: dict) -> bool:
        params = keep["params"]
        ok = all_finite([t.detach() for t in iter_tensors(out)] + [p.grad for p in params if p.grad is not None]
                         + params)
        found = self._scaler_found(keep)
        if isinstance(ok, torch.Tensor) and isinstance(found, torch.Tensor):
            return not bool(ok & ~found.to(ok.device))   # the one sync of a finite step
        return not bool(ok) or bool(found)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        keep = self._keep()
        handles = [o.register_step_pre_hook(self._lazy_hook(keep)) for o in self.optimizers] \
            if self.snapshot == "lazy" else []
        try:
            out = self.step(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        index, self.calls, self.last = self.calls, self.calls + 1, None
        if not self._is_bad(out, keep):
            return out
        seen = self._sources(out, keep)
        if not seen:
            return out                      # a false alarm of the fused check (a norm past fp32's range)
        if sum(f.replayed for f in self.findings) >= self.replays:
            finding = StepFinding(index, seen, None, False,
                                  tr("not replayed (replays={replays} used up)", replays=self.replays))
        elif keep.get("checked") and not keep["params_kept"]:
            finding = StepFinding(index, seen, None, False,
                                  tr("not replayed: the gradients were finite, so snapshot='lazy' kept no copy of "
                                     "the parameters, and the optimizer step made them inf/NaN (use snapshot='full')"))
        else:
            self._restore(keep)
            with NonFiniteHunter(self.model) as hunter:
                out = self.step(*args, **kwargs)
            finding = StepFinding(index, seen, hunter.first, True,
                                  "" if hunter.first else tr("the replay stayed finite: the step is not deterministic"))
        self.findings.append(finding)
        self.last = finding
        return out


def watch(step: Callable[..., Any], model: nn.Module, optimizer: torch.optim.Optimizer | Sequence | None = None,
          scaler: Any = None, *, snapshot: str = "full", replays: int = 1) -> WatchedStep:
    """Wrap your training step: every call runs it bare and checks it once; a step that went inf/NaN is run again
    from the state before it under :class:`~ampkit.diagnose.hunter.NonFiniteHunter`, which names its first op.

    The rule, for each call ``watched(*inputs)``::

        keep = copy of (parameters, gradients, buffers, optimizer, scaler, RNG states)   # before the step
        out  = step(*inputs)                                  # your whole step: no hook, no dispatch mode
        if inf/NaN in (out, gradients, parameters) or scaler found inf:      # one fused check, one sync
            if replays left:
                restore keep                                  # the exact state before this step
                with NonFiniteHunter(model) as h:
                    out = step(*inputs)                       # the same step again: it counts once
                watched.last = StepFinding(..., event=h.first)   # the op, its module, forward or backward
        return out

    ``step(*inputs)``: your whole step (zero_grad, forward, loss, backward, scaler/optimizer step), with its batch
    as arguments; return the loss. ``model``: for module names and the parameters/buffers to restore;
    ``optimizer``: one or a list (their state is restored); ``scaler``: ``torch.amp.GradScaler``, an ampkit scaler
    or ``None``. ``snapshot``: ``"full"`` or ``"lazy"`` (the module docstring compares them); ``replays``: how many
    bad steps to replay (later ones are only recorded in ``findings``). Creating the watch installs nothing; a call
    installs no hook and no dispatch mode (``"lazy"``: one optimizer step pre-hook, removed at the end of the call).

    >>> model = torch.nn.Linear(4, 3); opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> scaler = torch.amp.GradScaler("cpu")
    >>> def train_step(x, y):                          # your step as it is, with its batch as arguments
    ...     opt.zero_grad()
    ...     with torch.autocast("cpu", dtype=torch.float16):
    ...         loss = torch.nn.functional.cross_entropy(model(x), y)
    ...     scaler.scale(loss).backward()
    ...     scaler.step(opt)
    ...     scaler.update()
    ...     return loss
    >>> train_step = watch(train_step, model, opt, scaler)      # the one added line
    >>> for x in (torch.ones(2, 4), torch.full((2, 4), 1e5)):   # 1e5 is above fp16's largest value, 65504
    ...     loss = train_step(x, torch.zeros(2, dtype=torch.long))
    ...     if train_step.last is not None:
    ...         print(train_step.last.step, train_step.last.seen_in)
    1 ('loss', 'gradients', 'scaler')
    >>> train_step.last.event.phase, train_step.last.event.op   # autocast's cast of the batch to fp16
    ('forward', 'aten._to_copy')
    """
    return WatchedStep(step, model, optimizer, scaler, snapshot=snapshot, replays=replays)
