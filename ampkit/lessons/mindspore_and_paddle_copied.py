"""Notebook ``09_mindspore_and_paddle``, section 6: the mixed-precision code that learners copy from blog posts,
beside what MindSpore and Paddle do. Like :mod:`ampkit.lessons.mindspore_and_paddle`, a function imports a
framework only when called (``make frameworks`` installs both in ``.venv-frameworks``).

- :func:`signature_defaults`: a callable's defaults read from its signature (``Model.train``'s
  ``dataset_sink_mode``, ``paddle.amp.GradScaler``'s ``decr_every_n_nan_or_inf``), never recalled.
- :func:`scaled_gradients`: the copied step's fixed loss scale, multiplied into the loss before
  ``mindspore.grad`` and divided out of each gradient after it.
- :func:`round_trip_rows`: those gradients beside the unscaled ones and an fp32 network's (pure NumPy).
- :func:`without_jit_notes`: ``@ms.jit`` on a function defined in a notebook cell, without two notes MindSpore
  writes about it (collected, not printed).

>>> def f(a, b=2, *, c="x"):
...     pass
>>> signature_defaults(f, "b", "c")
{'b': 2, 'c': 'x'}
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ampkit.i18n import Word
from ampkit.lessons.mindspore_and_paddle import captured_mindspore_log

__all__ = ["signature_defaults", "scaled_gradients", "round_trip_rows", "without_jit_notes", "JIT_NOTES"]

#: What :func:`without_jit_notes` keeps out of the output: MindSpore's C++ log line when it looks for the source file
#: of a function that a notebook cell defined (``file_utils.cc``: "Get realpath failed, path[/tmp/ipykernel_...]"),
#: and its Python log's warning when code that defines a jit function runs again (``mindspore/graph/api.py``: "The
#: function ... has been compiled again").
JIT_NOTES: tuple[str, ...] = ("Get realpath failed", "has been compiled again")


def signature_defaults(fn: Callable, *names: str) -> dict[str, object]:
    """The defaults of ``fn``'s parameters ``names``, read from ``inspect.signature(fn)``; a name ``fn`` does not
    have is refused with the names it has."""
    params = inspect.signature(fn).parameters
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"{getattr(fn, '__qualname__', fn)} has no parameter {', '.join(missing)}; "
                         f"its parameters: {', '.join(params)}")
    return {n: params[n].default for n in names}


def scaled_gradients(net, loss_fn, data, label, scale: float) -> list[np.ndarray]:
    """What the copied step does to the gradients: ``mindspore.grad`` of ``loss_fn(net(data), label) * scale``
    with respect to ``net.trainable_params()``, each gradient then divided by ``scale`` (a MindSpore division, as
    the step writes ``g / loss_scale``). Run it in PyNative mode; ``scale=1.0`` gives the unscaled gradients."""
    import mindspore as ms

    if not scale > 0:
        raise ValueError(f"scale must be a positive number; got {scale!r}")

    def forward(x, y):
        return loss_fn(net(x), y) * scale

    grads = ms.grad(forward, None, net.trainable_params())(data, label)
    return [(g / scale).asnumpy() for g in grads]


def round_trip_rows(names: Sequence[str], reference: Sequence[np.ndarray], plain: Sequence[np.ndarray],
                    scaled: Sequence[np.ndarray], scale: float) -> list[dict]:
    """One row per parameter: how many elements of the scaled-then-divided gradient have the same bits as the
    unscaled one, and each one's largest error relative to the largest reference (fp32 network) gradient (to 3
    significant digits).

    >>> a = np.array([1.0, 2.0], np.float32)
    >>> r = round_trip_rows(["w"], [a], [a], [a + np.float32([0, 0.5])], 1024.0)[0]
    >>> r["same bits as unscaled"], r["max error, unscaled"], r["max error, ×1024 ÷1024"]
    ('1 of 2', 0.0, 0.25)
    """
    if not len(names) == len(reference) == len(plain) == len(scaled):
        raise ValueError("names, reference, plain and scaled must have one entry per parameter")
    rows = []
    for name, ref, a, b in zip(names, reference, plain, scaled):
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        same = int(np.count_nonzero(a.view(np.uint32) == b.view(np.uint32)))
        top = float(np.abs(ref).max()) or 1.0
        rows.append({Word("parameter"): name,
                     Word("same bits as unscaled"): Word("{same} of {n}", same=same, n=a.size),
                     Word("max error, unscaled"): float(f"{float(np.abs(a - ref).max()) / top:.3g}"),
                     Word("max error, ×{s} ÷{s}", s=f"{scale:g}"): float(f"{float(np.abs(b - ref).max()) / top:.3g}")})
    return rows


@contextlib.contextmanager
def without_jit_notes() -> Iterator[list[str]]:
    """Run the block with the notes of :data:`JIT_NOTES` collected into the yielded list instead of printed; every
    other line MindSpore writes (its C++ log on file descriptor 2, its Python logger from WARNING up) is passed on
    to ``sys.stderr`` when the block ends. Exceptions are not touched."""
    notes: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as native:
        os.dup2(native.fileno(), 2)
        try:
            with captured_mindspore_log(logging.WARNING) as records:
                yield notes
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            native.seek(0)
            lines = native.read().decode("utf-8", "replace").splitlines() + records
            for line in lines:
                if any(note in line for note in JIT_NOTES):
                    notes.append(line)
                elif line.strip():
                    print(line, file=sys.stderr)
