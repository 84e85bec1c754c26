"""wasmsched: what a scheduling-policy author writing Python depends on.

Subclass :class:`Policy`, implement ``decide(snapshot) -> Decision``, and bind
``Policy = wasmsched.component.export(MyPolicy)`` in the component's ``app.py``; build with
componentize-py. The SDK keeps the job table inside the component, so each tick only what
changed crosses from the host, yet ``decide`` sees complete, typed jobs (:class:`Snapshot`,
:class:`Job`). Times are float seconds, CPU int millicores, memory int bytes.

Start at :class:`Policy`, then :mod:`wasmsched.view` and :mod:`wasmsched.decision`. The
computations several papers share are in :mod:`wasmsched.stats`; the host's checks of a
decision, word for word, in :mod:`wasmsched.rules`; :mod:`wasmsched.testing`
builds snapshots natively so a policy is unit-tested with plain ``pytest``.
"""

from . import log, numeric, rules, stats, units
from .config import U8, U32, U64
from .decision import (
    Action,
    ActionKind,
    Decision,
    Deliver,
    Migrate,
    Place,
    Preempt,
    Resize,
    Rounds,
    SetCpu,
    SetGpuShare,
    SetMemory,
    Stop,
)
from .enums import Direction, JobKind, Level, WaitReason
from .policy import Failed, InvalidConfig, InvalidState, Policy, PolicyError, Runner, decode_state, encode_state
from .raw import MetricSpec, Scaling, Tiers
from .rules import Ledger, OverLimit
from .units import GiB, MiB, gib, mib
from .view import HISTORY_LIMIT, Gpu, GpuSlot, Job, Node, ProgressRecord, Snapshot, Tenant

__all__ = [
    "HISTORY_LIMIT",
    "U8",
    "U32",
    "U64",
    "Action",
    "ActionKind",
    "Decision",
    "Deliver",
    "Direction",
    "Failed",
    "GiB",
    "Gpu",
    "GpuSlot",
    "InvalidConfig",
    "InvalidState",
    "Job",
    "JobKind",
    "Ledger",
    "Level",
    "MetricSpec",
    "MiB",
    "Migrate",
    "Node",
    "OverLimit",
    "Place",
    "Policy",
    "PolicyError",
    "Preempt",
    "ProgressRecord",
    "Resize",
    "Rounds",
    "Runner",
    "Scaling",
    "SetCpu",
    "SetGpuShare",
    "SetMemory",
    "Snapshot",
    "Stop",
    "Tenant",
    "Tiers",
    "WaitReason",
    "decode_state",
    "encode_state",
    "gib",
    "log",
    "mib",
    "numeric",
    "rules",
    "stats",
    "units",
]
