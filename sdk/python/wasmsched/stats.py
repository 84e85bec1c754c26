"""Computations several schedulers share: windowed means, normalised progress, growth
efficiency, and a proportional split with floors and caps. The same operations in the same
order as the Rust SDK's ``stats``, so a port gets the same bits."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from .enums import Direction
from .numeric import fmax, sum_left


class Normaliser:
    """Normalises a metric series: a lower-is-better value is divided by the largest value
    seen so far (so it lies in (0, 1]); a higher-is-better value passes as is."""

    __slots__ = ("direction", "largest")

    def __init__(self, direction: Direction) -> None:
        self.direction = direction
        self.largest = 0.0

    def push(self, value: float) -> float | None:
        """The normalised value of the next sample; None for NaN or infinite samples, and for
        lower-is-better samples while every value seen is zero or negative."""
        if not math.isfinite(value):
            return None
        if self.direction is Direction.HIGHER_IS_BETTER:
            return value
        self.largest = fmax(self.largest, value)
        return value / self.largest if self.largest > 0.0 else None


def reaches(direction: Direction, value: float, target: float) -> bool:
    """Whether ``value`` meets ``target``: at least it when higher is better, at most it when
    lower is better."""
    if direction is Direction.HIGHER_IS_BETTER:
        return value >= target
    return value <= target


def window_mean(samples: Iterable[tuple[float, float]], start: float, end: float) -> float | None:
    """Mean of the samples whose time lies in ``(start, end]``; None when there are none."""
    total = 0.0
    n = 0
    for t, v in samples:
        if start < t <= end and math.isfinite(v):
            total += v
            n += 1
    return total / float(n) if n > 0 else None


def growth_rate(before: float, now: float, dt: float) -> float:
    """|now − before| / dt: how fast a normalised metric moved, whatever its direction. Zero
    when ``dt`` is not positive."""
    return abs(now - before) / dt if dt > 0.0 else 0.0


def growth_efficiency(rate: float, cpu_fraction: float) -> float:
    """Progress bought per unit of CPU: ``rate / cpu_fraction``, with ``cpu_fraction`` the
    job's CPU use as a fraction of its node. Zero when the job used about no CPU."""
    if cpu_fraction > 1e-6 and math.isfinite(rate):
        return rate / cpu_fraction
    return 0.0


def _clamp(x: float, lo: float, hi: float) -> float:
    """``f64::clamp`` (NaN stays NaN)."""
    if x < lo:
        x = lo
    if x > hi:
        x = hi
    return x


def proportional_split(
    total: float, weights: Sequence[float], floors: Sequence[float], caps: Sequence[float]
) -> list[float]:
    """Splits ``total`` in proportion to ``weights``, each share clamped to
    ``[floors[i], caps[i]]``.

    Finds the level λ at which Σ clamp(λ·wᵢ, floorᵢ, capᵢ) = total. When the floors alone
    exceed ``total`` they are scaled down to fit; when the caps alone fall short, every share
    is its cap and the rest stays unallocated. Weights that are all zero count as equal;
    negative or NaN weights count as zero.

    Raises ValueError when the three sequences differ in length.
    """
    if not len(weights) == len(floors) == len(caps):
        raise ValueError("proportional_split: slices differ in length")
    n = len(weights)
    if n == 0 or total <= 0.0:
        return [0.0] * n
    caps = [fmax(c, f) for c, f in zip(caps, floors)]
    floor_sum = sum_left(floors)
    if floor_sum >= total:
        return [f * total / floor_sum for f in floors]
    if sum_left(caps) <= total:
        return caps

    def clean(w: float) -> float:
        return w if math.isfinite(w) and w > 0.0 else 0.0

    all_zero = all(clean(w) == 0.0 for w in weights)
    w = [1.0 if all_zero else clean(x) for x in weights]

    def at(level: float) -> float:
        return sum_left(_clamp(level * w[i], floors[i], caps[i]) for i in range(n))

    # The sum is non-decreasing in the level: bisect.
    hi = 1.0
    while at(hi) < total and hi < 1e300:
        hi *= 2.0
    lo = 0.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if at(mid) < total:
            lo = mid
        else:
            hi = mid
    return [_clamp(hi * w[i], floors[i], caps[i]) for i in range(n)]


def entitled(capacity: int, weights: Sequence[float], demand: Sequence[int]) -> list[float]:
    """Each tenant's entitlement now: ``capacity`` GPUs shared by ``weights``, max-min fair
    (water-filling), none given more than its usable demand
    (:meth:`wasmsched.rules.Entitlement.usable_demand`): the host's own rule, the one its
    fairness figures measure against."""
    return proportional_split(float(capacity), weights, [0.0] * len(demand), [float(d) for d in demand])


__all__ = [
    "Normaliser",
    "entitled",
    "growth_efficiency",
    "growth_rate",
    "proportional_split",
    "reaches",
    "window_mean",
]
