"""What a policy returns: a :class:`Decision` holding :class:`Action` s, built with builders so
that units and reasons are never positional guesses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Union

from .config import json_kind
from .units import as_millis

# What an action does: one class per case of the contract's `action-kind` variant.


@dataclass(slots=True, frozen=True)
class SetCpu:
    """Cap the job's CPU (millicores); None lifts the limit."""

    limit: int | None


@dataclass(slots=True, frozen=True)
class SetMemory:
    """Cap the job's memory (bytes); None lifts the limit."""

    limit: int | None


@dataclass(slots=True, frozen=True)
class Migrate:
    """Restart the job on another node from its last checkpoint."""

    node: int


@dataclass(slots=True, frozen=True)
class Deliver:
    """The model reached its deliverable target: hand it to the client."""


@dataclass(slots=True, frozen=True)
class Stop:
    """End the job."""


@dataclass(slots=True, frozen=True)
class SetGpuShare:
    """Set the job's share of GPU ``gpu`` (its index on the job's node)."""

    gpu: int
    percent: int


@dataclass(slots=True, frozen=True)
class Place:
    """Start a queued job: ``nodes`` holds (node, GPU indices there) per node; with ``share``
    it may take GPUs other jobs hold (co-location)."""

    nodes: tuple[tuple[int, tuple[int, ...]], ...]
    share: bool = False


@dataclass(slots=True, frozen=True)
class Preempt:
    """Checkpoint a running job and queue it again with its progress."""


@dataclass(slots=True, frozen=True)
class Resize:
    """Restart a running job from its checkpoint on other GPUs: ``nodes`` holds (node, GPU
    indices there) per node, their total one of its ``scaling.gpu_counts``; ``batch_size`` is
    its new global batch size (None keeps it)."""

    nodes: tuple[tuple[int, tuple[int, ...]], ...]
    batch_size: int | None = None
    share: bool = False


ActionKind = Union[SetCpu, SetMemory, Migrate, Deliver, Stop, SetGpuShare, Place, Preempt, Resize]


@dataclass(slots=True, frozen=True)
class Action:
    """One thing to do to one job, and why. Build with the class methods, then
    :meth:`because`."""

    job: int
    kind: ActionKind
    reason: str = ""

    @classmethod
    def set_cpu(cls, job: int, limit: int) -> Action:
        """Cap the job's CPU at ``limit`` millicores."""
        return cls(job, SetCpu(limit))

    @classmethod
    def lift_cpu(cls, job: int) -> Action:
        """Lift the job's CPU limit."""
        return cls(job, SetCpu(None))

    @classmethod
    def set_memory(cls, job: int, limit: int) -> Action:
        """Cap the job's memory at ``limit`` bytes."""
        return cls(job, SetMemory(limit))

    @classmethod
    def lift_memory(cls, job: int) -> Action:
        """Lift the job's memory limit."""
        return cls(job, SetMemory(None))

    @classmethod
    def migrate(cls, job: int, node: int) -> Action:
        """Restart the job on ``node`` from its last checkpoint."""
        return cls(job, Migrate(node))

    @classmethod
    def deliver(cls, job: int) -> Action:
        """The job's model reached its deliverable target: hand it over."""
        return cls(job, Deliver())

    @classmethod
    def stop(cls, job: int) -> Action:
        """End the job."""
        return cls(job, Stop())

    @classmethod
    def set_gpu_share(cls, job: int, gpu: int, percent: int) -> Action:
        """Give the job ``percent`` of GPU ``gpu`` on its node."""
        return cls(job, SetGpuShare(gpu, percent))

    @classmethod
    def place(cls, job: int, node: int, gpus: Iterable[int] = ()) -> Action:
        """Start a queued job on ``node`` with these of its GPUs (none for a CPU job); each
        must be free."""
        return cls.place_on(job, [(node, gpus)], share=False)

    @classmethod
    def place_on(cls, job: int, nodes: Iterable[tuple[int, Iterable[int]]], share: bool = False) -> Action:
        """Start a queued job over several nodes, one entry per node with its GPUs there; with
        ``share``, it may take GPUs other jobs hold (co-location)."""
        return cls(job, Place(tuple((n, tuple(g)) for n, g in nodes), share))

    @classmethod
    def preempt(cls, job: int) -> Action:
        """Checkpoint a running job and send it back to the queue with its progress."""
        return cls(job, Preempt())

    @classmethod
    def resize(cls, job: int, nodes: Iterable[tuple[int, Iterable[int]]], batch_size: int | None = None) -> Action:
        """Restart a running job from its checkpoint on other GPUs, one entry per node with its
        GPUs there (their total one of its ``scaling.gpu_counts``), at ``batch_size`` (None
        keeps it). It pays its restore delay, as a migration does."""
        return cls(job, Resize(tuple((n, tuple(g)) for n, g in nodes), batch_size))

    def because(self, reason: str) -> Action:
        """The same action with its reason; the reason goes into the audit log."""
        return replace(self, reason=reason)

    @property
    def cpu_limit(self) -> SetCpu | None:
        """The CPU limit it sets (``SetCpu(None)`` lifts it); None when it is not a CPU
        action."""
        return self.kind if isinstance(self.kind, SetCpu) else None


@dataclass(slots=True)
class Decision:
    """A policy's answer for one tick."""

    actions: list[Action] = field(default_factory=list)
    #: When the policy wants its next call, seconds from now, if it said.
    next_call: float | None = None
    #: Why queued jobs wait, as said with :meth:`pending`: (job, reason), in order.
    pending_reasons: list[tuple[int, str]] = field(default_factory=list)

    def push(self, action: Action) -> Decision:
        """Add an action; returns the decision, to chain."""
        self.actions.append(action)
        return self

    def extend(self, actions: Iterable[Action]) -> Decision:
        """Add actions, in order."""
        self.actions.extend(actions)
        return self

    def call_again_in(self, seconds: float) -> Decision:
        """Ask to be called again no sooner than ``seconds`` from now (the host reads more
        than an hour as an hour)."""
        self.next_call = seconds
        return self

    def pending(self, job: int, reason: str) -> Decision:
        """Say why queued job ``job`` waits, in a few words ("8 A100 asked, 3 free");
        ``status``, the audit log and the report show it. The host keeps the first 120 bytes
        and the first reason per job. Returns the decision, to chain."""
        self.pending_reasons.append((job, reason))
        return self

    def cpu_limit_for(self, job: int) -> SetCpu | None:
        """The last CPU limit set on ``job`` (``SetCpu(None)`` when lifted); None when the
        decision sets none."""
        for a in reversed(self.actions):
            if a.job == job and isinstance(a.kind, SetCpu):
                return a.kind
        return None

    def is_empty(self) -> bool:
        """True when it holds no action."""
        return not self.actions

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def next_call_ms(self) -> int | None:
        """The next call as the contract carries it: whole milliseconds, rounded (0 for a
        negative or NaN time)."""
        return None if self.next_call is None else as_millis(self.next_call)


@dataclass(slots=True)
class Rounds:
    """A policy's clock of rounds: every ``interval`` it does its work, and between rounds it
    asks the host to call again when the next one is due. It rides in the saved state as
    ``{"last_s": …}``, the shape the Rust SDK's ``Rounds`` serialises to."""

    last_s: float | None = None

    def due(self, now: float, interval: float, decision: Decision) -> bool:
        """Whether a round is due at ``now``, ``interval`` after the last one (the first call
        always is). When it is, ``now`` becomes the last round; when not, ``decision`` asks to
        be called again when it will be."""
        if self.last_s is not None:
            next_round = self.last_s + interval
            if now + 1e-9 < next_round:
                decision.call_again_in(next_round - now)
                return False
        self.last_s = now
        return True

    def start(self, now: float) -> None:
        """Start a round at ``now`` whatever the interval (a job arrived, say)."""
        self.last_s = now

    def to_json(self) -> dict[str, Any]:
        """As serde_json writes the Rust ``Rounds``."""
        return {"last_s": self.last_s}

    @classmethod
    def from_json(cls, value: Any) -> Rounds:
        """From ``{"last_s": number or null}`` (a missing ``last_s`` is null, as serde reads an
        ``Option``). Raises ValueError on anything else."""
        if not isinstance(value, dict):
            raise ValueError(f"invalid type: {json_kind(value)}, expected struct Rounds")
        last = value.get("last_s")
        if last is not None and (isinstance(last, bool) or not isinstance(last, (int, float))):
            raise ValueError(f"invalid type: {json_kind(last)}, expected f64")
        return cls(None if last is None else float(last))

