"""Rust's numeric semantics, for policies that must decide bit for bit like a Rust original.

Python and Rust agree on IEEE-754 arithmetic (``+ - * /`` on floats give the same bits), but
not on everything around it:

- ``f64::round`` rounds half away from zero; Python's ``round`` rounds half to even.
- ``x as u64`` saturates (NaN and negatives give 0); ``int(x)`` raises or grows.
- ``f64::min``/``max`` return the other operand when one is NaN; Python's ``min``/``max``
  depend on the argument order.
- ``Iterator::sum`` adds left to right; Python 3.12+'s ``sum`` of floats is compensated.
- ``format!("{x:.4}")`` writes ``NaN`` where Python writes ``nan``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1


def round_half_away(x: float) -> float:
    """``f64::round``: the nearest integer, halves away from zero (NaN and infinities as is)."""
    if not math.isfinite(x):
        return x
    a = abs(x)
    whole = math.floor(a)
    # `a - whole` is exact for a float, so the comparison sees the true fraction.
    r = whole + 1.0 if a - whole >= 0.5 else float(whole)
    return math.copysign(r, x)


def as_u64(x: float) -> int:
    """``x as u64``: truncates toward zero, saturating; NaN and negatives give 0."""
    if x != x or x <= 0.0:
        return 0
    if x >= 18446744073709551616.0:
        return U64_MAX
    return int(x)


def fmin(a: float, b: float) -> float:
    """``f64::min``: the smaller; the other operand when one is NaN."""
    if a != a:
        return b
    if b != b:
        return a
    return b if b < a else a


def fmax(a: float, b: float) -> float:
    """``f64::max``: the larger; the other operand when one is NaN."""
    if a != a:
        return b
    if b != b:
        return a
    return b if b > a else a


def sum_left(values: Iterable[float]) -> float:
    """``Iterator::<f64>::sum``: plain left-to-right addition, starting from -0.0."""
    total = -0.0
    for v in values:
        total += v
    return total


def fmt_fixed(x: float, precision: int) -> str:
    """``format!("{x:.N}")`` for an f64: fixed point with ``precision`` decimals."""
    if x != x:
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{precision}f}"
