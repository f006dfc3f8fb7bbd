"""Measure jmp's DynamicLossScale with real JAX, op by op and under jax.jit: the reference values pinned in
tests/test_scaling_jmp_measured.py (MEASURED there is this script's output).

Not a test (pytest only imports it, looking for doctests: it has none) and not run by the kit, which needs no
JAX. To rerun it, in a separate virtual environment (not the kit's):

    python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install jax==0.10.2 jaxlib==0.10.2 jmp==0.0.4
    /tmp/jaxenv/bin/python tests/_measure_jmp.py

It prints the versions, the device and a ``MEASURED = {...}`` literal: each case's arguments, its overflow flags
("o" an overflowing step, "." a clean one) and the loss scale after each step as float.hex, op by op ("eager") and
with the step compiled by ``jax.jit`` ("jit": the state goes in and comes back out, as in jmp's README).
"""
from __future__ import annotations

import random
import textwrap


def _stream(seed: int, n: int, p: float) -> str:
    rng = random.Random(seed)
    return "".join("o" if rng.random() < p else "." for _ in range(n))


CASES = {
    # the two examples
    "factor 3 from 2^15": (dict(loss_scale=2.0**15, factor=3), "oo"),
    "min_loss_scale 0.1 from 1": (dict(loss_scale=1.0, min_loss_scale=0.1), "ooooo"),
    # a random stream, factor 3, a floor that is not a float32 (0.7); then factors 5, 7 and 10
    "random, factor 3": (dict(loss_scale=1000.3, period=3, factor=3, min_loss_scale=0.7), _stream(0, 60, 0.35)),
    **{f"factor {k}": (dict(loss_scale=3.3e5, period=2, factor=k, min_loss_scale=0.3), _stream(i + 1, 24, 0.4))
       for i, k in enumerate((5, 7, 10))},
    "min_loss_scale above the scale": (dict(loss_scale=4.0, min_loss_scale=16.0), "oo"),
    "growth stops below inf": (dict(loss_scale=2.0**127, period=1), "..."),
}


def f32_hex(x: float) -> str:
    """float.hex of a float32 value, with its 6 significant hex digits (0x1.c71c72p+11)."""
    mantissa, exponent = x.hex().split("p")
    return f"{mantissa[:10]}p{exponent}"


def run(kwargs: dict, flags: str, jit: bool) -> list[str]:
    """The loss scale after each step, as float.hex (JAX is imported here: pytest's doctest collection imports this
    module, and the kit's environment has no JAX)."""
    import jax
    import jax.numpy as jnp
    import jmp

    step = jax.jit(lambda state, finite: state.adjust(finite)) if jit else (lambda state, finite: state.adjust(finite))
    kw = {k: (jnp.asarray(v, jnp.float32) if k in ("loss_scale", "min_loss_scale") else v) for k, v in kwargs.items()}
    state = jmp.DynamicLossScale(**kw)
    out = []
    for f in flags:
        state = step(state, jnp.asarray(f == "."))
        out.append(f32_hex(float(state.loss_scale)))
    return out


def compiled_backoff(factor: int) -> list[str]:
    """The ops of the compiled backoff (``jit(f)/div`` in XLA's optimised HLO): a multiply by float32(1/factor)."""
    import jax
    import jax.numpy as jnp
    import jmp

    def f(scale, counter, finite):
        return jmp.DynamicLossScale(scale, counter, factor=factor).adjust(finite).loss_scale

    hlo = jax.jit(f).lower(jnp.float32(2.0**15), jnp.int32(0), jnp.asarray(False)).compile().as_text()
    return [line.split(", metadata")[0].strip() for line in hlo.splitlines()
            if "jit(f)/div" in line or "constant(0.33" in line]


def main() -> None:
    import jax
    import jmp

    print(f"# jax {jax.__version__}, jmp {getattr(jmp, '__version__', '?')}, device {jax.devices()[0]}")
    print("# compiled backoff, factor 3:\n#  ", "; ".join(compiled_backoff(3)))
    print("MEASURED = {")
    for name, (kwargs, flags) in CASES.items():
        eager, jit = run(kwargs, flags, False), run(kwargs, flags, True)
        print(f"    {name!r}: (\n        {kwargs!r},\n        {flags!r},")
        for label, values in (("eager", eager), ("jit", jit)):
            body = textwrap.fill(", ".join(repr(v) for v in values), 104,
                                 initial_indent=" " * 8, subsequent_indent=" " * 9)
            print(f"        # {label}\n        [{body.strip()}],")
        print("    ),")
    print("}")


if __name__ == "__main__":
    main()
