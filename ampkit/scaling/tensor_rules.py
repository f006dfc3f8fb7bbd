"""The frameworks whose loss scale is a float32 tensor — Paddle, MindSpore's functional scaler, Keras 3, tf.keras 2,
jmp — as pure rules with their float32 arithmetic (jmp twice: op by op, and as ``jax.jit`` compiles it, which
changes both its arithmetic and its floor).

Taught in notebook ``03_loss_scaling.ipynb`` (section "Every framework's scaler as a preset"). Each class is a
:class:`ampkit.scaling.replays.ScaleRule` (``scale``, ``update(overflow)``, ``drops_overflow``) that transliterates
its framework's update code: the same counters and comparisons in the same order, and the same float operation in
the same dtype — float32 here (each class's docstring gives its rule as pseudo-code, ``float32(x)`` meaning "round
to the nearest float32"). A product or quotient of two float32 numbers computed in float64 and rounded once to
float32 is the float32 operation itself (float64 has more than twice float32's precision), which is how the rules
compute. Whether an operation multiplies or divides matters: ``S * float32(1/3)`` and ``S / 3`` differ in the last
bit for about one ``S`` in three. The rules whose scale is a Python float (Apex, DeepSpeed) are in
:mod:`ampkit.scaling.framework_rules`; torch's and MindSpore's managers in :mod:`ampkit.scaling.rules`.

>>> r = PaddleGradScalerRule(init_loss_scaling=8.0, decr_every_n_nan_or_inf=2)
>>> for o in (True, False, True, True): r.update(o)
>>> r.scale        # the clean step reset the count: only the 2nd overflow IN A ROW lowered it
4.0
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

from ampkit._util import check_int
from ampkit.formats import to_fp32
from ampkit.scaling.rules import StoredScale, f32_setting

__all__ = ["PaddleGradScalerRule", "MindSporeFunctionalRule", "KerasLossScaleRule", "TFKeras2LossScaleRule",
           "JmpDynamicLossScale", "JmpDynamicRule", "JmpJitDynamicRule"]


def _int_factor(name: str, value: Any, why: str) -> int:
    """An integer factor >= 1 (MindSpore's ``check_positive_int``; jmp's ``factor: int``): a float is refused,
    never truncated."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= 1, e.g. 2 or 3 ({why}; a float is not accepted); "
                        f"got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, e.g. 2 or 3 ({why}); got {value!r}")
    return int(value)


def _mindspore_int(name: str, value: Any) -> int:
    """MindSpore's ``Validator.check_positive_int``: a Python ``int`` > 0 (a bool, a float or a numpy integer is
    refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a Python int >= 1, e.g. 2 (MindSpore checks it with check_positive_int, "
                        f"which refuses floats, bools and numpy integers); got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a Python int >= 1, e.g. 2 (MindSpore's check_positive_int); got {value!r}")
    return value


class _Rule(StoredScale):
    """What every rule here shares: the stored float32 scale (``scale``) and skipping of overflowing steps."""

    name: str
    drops_overflow = True


class PaddleGradScalerRule(_Rule):
    """Paddle's dygraph ``paddle.amp.GradScaler`` (``AmpScaler._update``): an overflowing step is skipped; the scale
    is multiplied by ``decr_ratio`` when the bad-step count reaches ``decr_every_n_nan_or_inf`` — and that count is
    reset by every clean step, so it counts overflows IN A ROW (the docstring's "accumulated" notwithstanding), and
    reset after each decrease (with N=2, four overflows in a row lower the scale twice). After
    ``incr_every_n_steps`` clean steps in a row it is multiplied by ``incr_ratio``. No floor, no ceiling, no
    finiteness check (the scale can grow to inf).

    The scale is a float32 tensor (``np.array([init]).astype(np.float32)``); ``self._scale * ratio`` with a Python
    float runs Paddle's ``scale`` kernel, which converts the ratio to the tensor's dtype first
    (``CallScalarFunction`` -> ``scale_ad_func(x, Scalar(ratio))``, ``ScaleKernel``: ``scale.to<T>()``)::

        S = float32(init_loss_scaling);  I = float32(incr_ratio);  D = float32(decr_ratio)
        overflow:  incr = 0;  decr += 1
                   if decr == decr_every_n_nan_or_inf: S = float32(S * D);  decr = 0
        clean:     decr = 0;  incr += 1
                   if incr == incr_every_n_steps: S = float32(S * I);  incr = 0

    >>> r = PaddleGradScalerRule(init_loss_scaling=8.0, decr_every_n_nan_or_inf=2)
    >>> for o in (True,) * 4: r.update(o)
    >>> r.scale
    2.0
    """

    name = "Paddle GradScaler"

    def __init__(self, init_loss_scaling: float = 2.0**16, incr_ratio: float = 2.0, decr_ratio: float = 0.5,
                 incr_every_n_steps: int = 2000, decr_every_n_nan_or_inf: int = 1):
        why = " (Paddle applies it as a float32)"
        self._scale = f32_setting("init_loss_scaling", init_loss_scaling, why=" (Paddle keeps a float32 tensor)")
        self.incr_ratio = f32_setting("incr_ratio", incr_ratio, 1.0, why=why)
        self.decr_ratio = f32_setting("decr_ratio", decr_ratio, why=why)
        if self.decr_ratio >= 1.0:
            raise ValueError(f"decr_ratio must be < 1 as a float32 (Paddle asserts decr_ratio < 1.0 and applies it "
                             f"as a float32); got {decr_ratio!r} (as a float32: {self.decr_ratio!r})")
        self.incr_every_n_steps = check_int("incr_every_n_steps", incr_every_n_steps)
        self.decr_every_n_nan_or_inf = check_int("decr_every_n_nan_or_inf", decr_every_n_nan_or_inf)
        self._incr_count = 0
        self._decr_count = 0

    def update(self, overflow: bool) -> None:
        """``AmpScaler._update``."""
        if overflow:
            self._incr_count = 0
            self._decr_count += 1
            if self._decr_count == self.decr_every_n_nan_or_inf:
                self._scale = to_fp32(self._scale * self.decr_ratio)
                self._decr_count = 0
        else:
            self._decr_count = 0
            self._incr_count += 1
            if self._incr_count == self.incr_every_n_steps:
                self._scale = to_fp32(self._scale * self.incr_ratio)
                self._incr_count = 0


class MindSporeFunctionalRule(_Rule):
    """MindSpore's functional ``mindspore.amp.DynamicLossScaler(scale_value, scale_factor, scale_window)`` (no
    defaults; MindSpore's own checks: ``scale_value`` a Python int or float >= 1 AS GIVEN — 0.99999999 is refused
    although its float32 is 1.0 — ``scale_factor`` and ``scale_window`` positive Python ints).
    ``adjust(grads_finite)`` grows after ``scale_window`` finite steps (only to a finite value), else sets
    ``max(1, scale / scale_factor)``. It skips nothing itself: the skip is the user's ``all_finite`` check (the
    tutorial's step updates only when finite), which this rule assumes.

    ``adjust`` in float32 (``scale_value`` is a float32 ``Parameter``; the Python int factor is converted to
    float32; ``/`` is a float32 DIVISION here, unlike the update cell's reciprocal)::

        S = float32(scale_value);  k = float32(scale_factor);  counter = 0
        grown = float32(S * k)
        finite:    if counter == scale_window - 1 and isfinite(grown): S = grown
        overflow:  S = max(1.0, float32(S / k))
        counter = ((counter + 1) % scale_window) * finite

    >>> r = MindSporeFunctionalRule(4, 2, 1); r.update(True); r.update(True); r.update(True); r.scale
    1.0
    """

    name = "MindSpore amp.DynamicLossScaler"

    def __init__(self, scale_value: float, scale_factor: int, scale_window: int):
        if isinstance(scale_value, bool) or not isinstance(scale_value, (int, float)):
            raise TypeError(f"scale_value must be a Python int or float >= 1, e.g. 2**16 (MindSpore's "
                            f"check_value_type(..., [float, int]) refuses bools, numpy.float32 and other types); "
                            f"got {type(scale_value).__name__} {scale_value!r}")
        self._scale = f32_setting("scale_value", scale_value, 1.0, at_least=True,
                                   why=" (MindSpore refuses a scale_value below 1 as given, before it keeps it as "
                                       "a float32)")
        self.scale_factor = _mindspore_int("scale_factor", scale_factor)
        self._k = to_fp32(self.scale_factor)
        self.scale_window = _mindspore_int("scale_window", scale_window)
        self._counter = 0

    def update(self, overflow: bool) -> None:
        """``DynamicLossScaler.adjust(grads_finite=not overflow)``."""
        finite = not overflow
        if finite:
            grown = to_fp32(self._scale * self._k)
            if self._counter == self.scale_window - 1 and math.isfinite(grown):
                self._scale = grown
        else:
            self._scale = max(1.0, to_fp32(self._scale / self._k))
        self._counter = ((self._counter + 1) % self.scale_window) * int(finite)


class KerasLossScaleRule(_Rule):
    """Keras 3 ``keras.optimizers.LossScaleOptimizer(inner, initial_scale=2**15, dynamic_growth_steps=2000)``:
    non-finite gradients skip the step, halve the scale and reset the counter — with NO floor (Keras 3 multiplies
    by 0.5 unconditionally; tf.keras 2 kept it >= 1, see :class:`TFKeras2LossScaleRule`); a finite step doubles the
    scale when the counter equals ``dynamic_growth_steps - 1`` (and resets it), else increments it.

    The scale is a float32 variable (``add_variable(dtype="float32")``)::

        S = float32(initial_scale);  counter = 0
        overflow:  counter = 0;  S = float32(S * 0.5)                        # down to subnormals and 0
        clean:     if counter == dynamic_growth_steps - 1: counter = 0;  S = float32(S * 2.0)   # may reach inf
                   else: counter += 1

    >>> r = KerasLossScaleRule(initial_scale=1.0); r.update(True); r.scale
    0.5
    """

    name = "Keras 3 LossScaleOptimizer"
    floor: float | None = None

    def __init__(self, initial_scale: float = 2.0**15, dynamic_growth_steps: int = 2000):
        self._scale = f32_setting("initial_scale", initial_scale, why=" (Keras keeps a float32 variable)")
        self.dynamic_growth_steps = check_int("dynamic_growth_steps", dynamic_growth_steps)
        self._step_counter = 0

    def _grow(self) -> float:
        return to_fp32(self._scale * 2.0)          # Keras 3: no finiteness check

    def _shrink(self) -> float:
        return to_fp32(self._scale * 0.5)          # Keras 3: ops.multiply(dynamic_scale, 0.5)

    def update(self, overflow: bool) -> None:
        """``_stateful_handle_finite_grads`` / ``_stateful_handle_non_finite_grads``."""
        if overflow:
            self._step_counter = 0
            self._scale = self._shrink()
        elif self._step_counter == self.dynamic_growth_steps - 1:
            self._step_counter = 0
            self._scale = self._grow()
        else:
            self._step_counter += 1


class TFKeras2LossScaleRule(KerasLossScaleRule):
    """tf.keras 2 (TensorFlow <= 2.15, and the ``tf_keras`` package) ``LossScaleOptimizer``
    (``_DynamicLossScaleState.update``, ``multiplier=2``): the same as Keras 3 but the lowered scale is kept >= 1
    and it grows only to a finite value (``_assign_if_finite``)::

        S = float32(initial_scale);  counter = 0                              # a float32 tf.Variable
        clean:     if counter + 1 >= dynamic_growth_steps:
                       G = float32(S * 2.0);  counter = 0
                       if isfinite(G): S = G
                   else: counter += 1
        overflow:  S = max(float32(S / 2.0), 1.0);  counter = 0

    >>> r = TFKeras2LossScaleRule(initial_scale=1.0); r.update(True); r.scale
    1.0
    """

    name = "tf.keras 2 LossScaleOptimizer"
    floor = 1.0

    def _grow(self) -> float:
        grown = to_fp32(self._scale * 2.0)
        return grown if math.isfinite(grown) else self._scale

    def _shrink(self) -> float:
        return max(to_fp32(self._scale / 2.0), 1.0)


@dataclasses.dataclass(frozen=True)
class JmpDynamicLossScale:
    """jmp's ``DynamicLossScale(loss_scale, counter=0, period=2000, factor=2, min_loss_scale=1)``, immutable: each
    step returns a NEW state and leaves this one as it was. ``loss_scale`` and ``min_loss_scale`` are float32 (the
    class docstring's ``jnp.asarray(2. ** 15)``; the default ``np.ones([], np.float32)``). jmp computes the same
    ``adjust`` two ways, and the two differ:

    :meth:`adjust` — op by op (no ``jax.jit``): ``loss_scale / factor`` is a float32 division, and the state keeps
    its ``min_loss_scale``.

    :meth:`jit_adjust` — what ``jax.jit(lambda s, f: s.adjust(f))(state, f)`` returns, i.e. a training step that
    takes the state in and gives it back: ``factor`` is static pytree metadata, so ``loss_scale / factor`` divides
    by a constant, which XLA's algebraic simplifier rewrites as ``loss_scale * (1 / factor)`` (``HandleDivide`` in
    ``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc``); and ``tree_flatten`` carries only ``loss_scale``
    and ``counter`` as data, ``period`` and ``factor`` as metadata, so ``tree_unflatten`` rebuilds the state with
    the default ``min_loss_scale``: the floor is 1 whatever was given, and the returned state's is 1::

        S = float32(loss_scale);  m = float32(min_loss_scale);  k = float32(factor)
        finite:    if counter == period - 1:
                       G = float32(S * k)
                       if isfinite(G): S = G
        overflow:  S = max(m, float32(S / k))                      # adjust (op by op)
                   S = max(1.0, float32(S * float32(1 / k)))       # jit_adjust (and m = 1.0 from now on)
        counter = ((counter + 1) % period) * finite

    The two agree for a power-of-two factor (jmp's default is 2) and ``min_loss_scale=1`` (the default).
    Measured with jax 0.10.2 and jmp 0.0.4 on a CPU (pinned in ``tests/test_scaling_jmp_measured.py``).

    >>> s = JmpDynamicLossScale(2.0**15, factor=3); t = s.adjust(False).adjust(False); (s.loss_scale, t.loss_scale)
    (32768.0, 3640.888916015625)
    >>> s.jit_adjust(False).jit_adjust(False).loss_scale             # XLA multiplies by float32(1/3)
    3640.88916015625
    """

    loss_scale: float
    counter: int = 0
    period: int = 2000
    factor: int = 2
    min_loss_scale: float = 1.0

    def _next(self, grads_finite: bool, lowered: float) -> JmpDynamicLossScale:
        if grads_finite:
            grown = to_fp32(self.loss_scale * to_fp32(self.factor))
            scale = grown if self.counter == self.period - 1 and math.isfinite(grown) else self.loss_scale
        else:
            scale = lowered
        counter = ((self.counter + 1) % self.period) * int(bool(grads_finite))
        return dataclasses.replace(self, loss_scale=scale, counter=counter)

    def adjust(self, grads_finite: bool) -> JmpDynamicLossScale:
        """The next state, op by op: periodic growth (to a finite value) while finite, else
        ``max(min_loss_scale, float32(scale / factor))``."""
        return self._next(grads_finite, max(to_fp32(self.min_loss_scale),
                                            to_fp32(self.loss_scale / to_fp32(self.factor))))

    def jit_adjust(self, grads_finite: bool) -> JmpDynamicLossScale:
        """The next state as a ``jax.jit``-compiled step returns it: the same growth, else
        ``max(1, float32(scale * float32(1 / factor)))``; ``min_loss_scale`` is lost (1.0 from now on)."""
        state = dataclasses.replace(self, min_loss_scale=1.0)       # tree_unflatten: the default floor
        return state._next(grads_finite, max(1.0, to_fp32(self.loss_scale * to_fp32(1.0 / self.factor))))


class JmpDynamicRule(_Rule):
    """jmp (JAX) ``DynamicLossScale`` run op by op (eager, no ``jax.jit``) as a rule: holds the current immutable
    state and replaces it with ``state.adjust(not overflow)`` (the arithmetic: :class:`JmpDynamicLossScale`; a
    float32 division, ``min_loss_scale`` honoured). jmp needs ``loss_scale`` (no default; its docstring example
    uses ``2**15``) and declares ``factor: int``; skipping is the user's ``jmp.select_tree(grads_finite, new,
    old)``, which this rule assumes. For a training step compiled with ``jax.jit``: :class:`JmpJitDynamicRule`.

    >>> r = JmpDynamicRule(1.0, min_loss_scale=0.1)
    >>> for _ in range(5): r.update(True)
    >>> r.scale                  # 0.5, 0.25, 0.125, then the floor: 0.1 as a float32
    0.10000000149011612
    """

    name = "jmp DynamicLossScale (op by op)"
    jit = False

    def __init__(self, loss_scale: float, period: int = 2000, factor: int = 2, min_loss_scale: float = 1.0):
        why = " (jmp keeps it as a float32 array)"
        self.state = JmpDynamicLossScale(f32_setting("loss_scale", loss_scale, why=why), 0,
                                         check_int("period", period),
                                         _int_factor("factor", factor, "jmp declares factor: int"),
                                         f32_setting("min_loss_scale", min_loss_scale, why=why))

    @property
    def scale(self) -> float:
        """The scale the next step uses."""
        return self.state.loss_scale

    def update(self, overflow: bool) -> None:
        """``state = state.adjust(grads_finite)`` (``jit_adjust`` for :class:`JmpJitDynamicRule`)."""
        self.state = (self.state.jit_adjust if self.jit else self.state.adjust)(not overflow)


class JmpJitDynamicRule(JmpDynamicRule):
    """jmp's ``DynamicLossScale`` in a training step compiled with ``jax.jit`` (the state passed in and returned,
    as in jmp's README): ``state.jit_adjust(not overflow)`` — the division by ``factor`` becomes a multiplication
    by ``float32(1 / factor)``, and the state loses ``min_loss_scale`` at the first step, so the floor is 1 (see
    :class:`JmpDynamicLossScale`). Same arguments as :class:`JmpDynamicRule`; ``min_loss_scale`` is accepted (jmp
    accepts it) and has no effect.

    >>> r = JmpJitDynamicRule(1.0, min_loss_scale=0.1)
    >>> for _ in range(5): r.update(True)
    >>> r.scale, r.state.min_loss_scale
    (1.0, 1.0)
    """

    name = "jmp DynamicLossScale (jax.jit)"
    jit = True
