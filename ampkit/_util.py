"""Small chores every ampkit module shares: one walk over nested tensors, one device sync, one validator family,
one count of the bytes autograd saves for backward.

Private to the kit (not taught by a notebook). The validators follow one rule, so the same mistake raises the same
exception type everywhere::

    wrong type  (a float where an int is needed, a string where a number is) -> TypeError
    wrong value (an int below the minimum, a name not among the choices)     -> ValueError

and every message names what is valid.

>>> map_tensors({"x": torch.ones(1), "n": 3}, lambda t: t * 2)
{'x': tensor([2.]), 'n': 3}
>>> [path for path, _ in walk((torch.zeros(1), [torch.ones(1), 2.0]))]
['[0]', '[1][0]', '[1][1]']
>>> check_int("steps", 0)
Traceback (most recent call last):
...
ValueError: steps must be an int >= 1; got 0
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ampkit.i18n import tr

__all__ = ["walk", "iter_tensors", "map_tensors", "first_tensor", "sync", "check_int", "check_number",
           "check_positive_finite", "check_choice", "saved_tensor_bytes"]


def walk(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a nested tuple/list/dict with its path (``"[0]['x']"``); tensors and anything else are leaves.

    >>> list(walk({"x": [torch.ones(1), 2]}))
    [("['x'][0]", tensor([1.])), ("['x'][1]", 2)]
    """
    if isinstance(obj, (tuple, list)):
        for i, o in enumerate(obj):
            yield from walk(o, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k, o in obj.items():
            yield from walk(o, f"{path}[{k!r}]")
    else:
        yield path, obj


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """The tensors in a nested tuple/list/dict, in order.

    >>> list(iter_tensors([torch.zeros(1), "skip me", {"y": torch.ones(1)}]))
    [tensor([0.]), tensor([1.])]
    """
    return (leaf for _, leaf in walk(obj) if isinstance(leaf, torch.Tensor))


def first_tensor(obj: Any) -> torch.Tensor | None:
    """The first tensor in a nested tuple/list/dict, or ``None``.

    >>> first_tensor(("loss", [torch.ones(2)])), first_tensor({"no": "tensors"})
    (tensor([1., 1.]), None)
    """
    return next(iter_tensors(obj), None)


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Apply ``fn`` to every tensor in a nested tuple/list/dict, keeping the structure (other leaves unchanged).

    >>> map_tensors((torch.ones(2), [3, torch.zeros(1)]), lambda t: t + 1)
    (tensor([2., 2.]), [3, tensor([1.])])
    """
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(map_tensors(o, fn) for o in obj)
    if isinstance(obj, list):
        return [map_tensors(o, fn) for o in obj]
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    return obj


def sync(device: torch.device | str) -> None:
    """Wait for ``device`` to finish its queued work (a no-op on the CPU, which runs synchronously).

    >>> sync("cpu")            # the CPU has no queue: returns at once
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def check_int(name: str, value: Any, minimum: int | None = 1, maximum: int | None = None) -> int:
    """``value`` as an ``int`` (numpy integers accepted; bools refused); TypeError / ValueError naming the range.

    >>> check_int("steps", 3), check_int("steps", 0, minimum=0)
    (3, 0)
    >>> check_int("steps", 2.0)
    Traceback (most recent call last):
    ...
    TypeError: steps must be an int >= 1; got float 2.0
    """
    lo = "" if minimum is None else f" >= {minimum}"
    hi = "" if maximum is None else f" <= {maximum}"
    want = tr("an int{lo}{and_}{hi}", lo=lo, and_=tr(" and") if lo and hi else "", hi=hi)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(tr("{name} must be {want}; got {type} {value!r}", name=name, want=want,
                           type=type(value).__name__, value=value))
    number = int(value)
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ValueError(tr("{name} must be {want}; got {value!r}", name=name, want=want, value=value))
    return number


def check_number(name: str, value: Any, example: str = "1.0") -> float:
    """``value`` as a finite ``float`` (ints accepted; bools refused).

    >>> check_number("lr", 1)
    1.0
    >>> check_number("lr", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: lr must be a finite number (e.g. 1.0); got nan
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(tr("{name} must be a finite number (e.g. {example}); got {type} {value!r}", name=name,
                           example=example, type=type(value).__name__, value=value))
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(tr("{name} must be a finite number (e.g. {example}); got {value!r}", name=name,
                            example=example, value=value))
    return value


def check_positive_finite(name: str, value: Any, example: str = "2.0**16") -> float:
    """``value`` as a positive finite ``float``.

    >>> check_positive_finite("init_scale", 2**16)
    65536.0
    >>> check_positive_finite("init_scale", 0)
    Traceback (most recent call last):
    ...
    ValueError: init_scale must be a positive finite number (e.g. 2.0**16); got 0.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(tr("{name} must be a positive finite number (e.g. {example}); got {type} {value!r}",
                           name=name, example=example, type=type(value).__name__, value=value))
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(tr("{name} must be a positive finite number (e.g. {example}); got {value!r}", name=name,
                            example=example, value=value))
    return value


def check_choice(name: str, value: Any, choices: Iterable[str], hint: str = "") -> str:
    """``value`` if it is one of ``choices`` (strings); else ValueError naming them.

    >>> check_choice("dtype", "bf16", ("fp16", "bf16"))
    'bf16'
    >>> check_choice("dtype", "fp8", ("fp16", "bf16"))
    Traceback (most recent call last):
    ...
    ValueError: dtype must be one of 'fp16', 'bf16'; got 'fp8'
    """
    choices = tuple(choices)
    if isinstance(value, str) and value in choices:
        return value
    raise ValueError(tr("{name} must be one of {choices}; got {value!r}{hint}", name=name,
                        choices=", ".join(map(repr, choices)), value=value, hint=hint))


def saved_tensor_bytes(fn: Callable[[], object], leave_out: Iterable[torch.Tensor] = ()) -> int:
    """Run ``fn()`` and return the bytes of the tensors autograd saved for the backward pass meanwhile, counted with
    ``torch.autograd.graph.saved_tensors_hooks``: each storage once (a view of a counted storage adds nothing), the
    storages of ``leave_out`` (a model's parameters, kept anyway) and meta tensors (no memory) left out.

    >>> x, w = torch.ones(8, 4, requires_grad=True), torch.ones(4, 4, requires_grad=True)
    >>> saved_tensor_bytes(lambda: x @ w)                 # x @ w saves both: 8*4 + 4*4 fp32 numbers
    192
    >>> saved_tensor_bytes(lambda: x @ w, leave_out=[w])
    128
    """
    skip = {t.untyped_storage().data_ptr() for t in leave_out}
    seen: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.device.type != "meta":
            s = t.untyped_storage()
            if s.data_ptr() not in skip:
                seen[(s.data_ptr(), s.nbytes())] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())
