"""The bound for a transcendental function computed on the page and in the engine: one ulp.

The page computes log2 (or exp, pow) with V8's ``Math`` functions (src/base/ieee754.cc: ports of FreeBSD msun's
fdlibm code, the same on every host); the engine with Python's ``math``, which calls the C library (glibc here, which
differs by version and picks code paths by CPU, an FMA variant among them). Neither is correctly rounded, so a test
never compares the two bit for bit. Each is faithful (its error is under 1 ulp), so each result is the true value
rounded down or up: the two are equal or neighbouring doubles. A test asserts that and then checks whatever the page
derives from its own value (a label, a clamp) as the engine derives it from that same value.
"""
from __future__ import annotations

import math


def within_an_ulp(a: float, b: float) -> bool:
    """a and b are the same double or neighbouring doubles (infinities only equal to themselves)."""
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a == b
    return a == b or math.nextafter(a, b) == b
