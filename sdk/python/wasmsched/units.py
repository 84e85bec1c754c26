"""Units as the SDK uses them: time in float seconds, CPU in int millicores, memory in int
bytes. The contract carries time in integer milliseconds; these convert exactly as the Rust
SDK's ``Seconds::from_millis`` and ``Seconds::as_millis`` do.
"""

from __future__ import annotations

import math

from .numeric import as_u64, fmt_fixed, round_half_away

#: A job's handle: unique on its host for the job's lifetime.
JobId = int
#: A node's handle: its index in the snapshot's node list.
NodeId = int
#: CPU in thousandths of a core.
Millicores = int
#: Memory in bytes.
Bytes = int
#: A duration or an instant, in seconds since the host's epoch.
Seconds = float

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def mib(n: int) -> Bytes:
    """``n`` mebibytes."""
    return n << 20


def gib(n: int) -> Bytes:
    """``n`` gibibytes."""
    return n << 30


def from_millis(ms: int) -> Seconds:
    """Seconds from milliseconds, as the contract carries time (``ms as f64 / 1000.0``)."""
    return float(ms) / 1000.0


def as_millis(seconds: Seconds) -> int:
    """Whole milliseconds, rounded half away from zero; negative and NaN give 0."""
    if math.isfinite(seconds) and seconds > 0.0:
        return as_u64(round_half_away(seconds * 1000.0))
    return 0


def from_cores(cores: float) -> Millicores:
    """Whole or fractional cores, rounded to the nearest millicore (negative and NaN give 0)."""
    if math.isfinite(cores) and cores > 0.0:
        return as_u64(round_half_away(cores * 1000.0))
    return 0


def cores(millicores: Millicores) -> float:
    """An amount of millicores in cores."""
    return float(millicores) / 1000.0


def fraction_of(part: Millicores, total: Millicores) -> float:
    """``part`` as a fraction of ``total`` (0 when ``total`` is zero)."""
    return 0.0 if total == 0 else float(part) / float(total)


def fmt_seconds(seconds: Seconds) -> str:
    """How the Rust SDK displays ``Seconds``: three decimals and ``s``."""
    return fmt_fixed(seconds, 3) + "s"
