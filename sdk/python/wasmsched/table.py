"""The job and node tables the SDK keeps inside the guest: each tick's delta (added and
removed jobs, numbers in columns, new progress records, nodes and tenants when they change)
folded into complete tables, so only what changed has to cross.
:class:`wasmsched.view.Snapshot` reads them. A port of the Rust SDK's ``view/table.rs``, step for step."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .enums import Direction, JobKind, WaitReason
from .raw import JobSpec, MetricSpec, Scaling, Tiers
from .units import from_millis

#: How many progress records the SDK keeps per job (the oldest are dropped first).
HISTORY_LIMIT = 512
#: The largest u32, a handle no host gives.
_NO_HANDLE = 0xFFFF_FFFF


class MalformedSnapshot(ValueError):
    """The host sent columns that do not fit together (a host bug)."""


@dataclass(slots=True, frozen=True)
class GpuSlot:
    """One GPU: its node and its index there."""

    node: int
    index: int


@dataclass(slots=True, frozen=True)
class ProgressRecord:
    """One progress report of a job, as kept in its history."""

    #: When the job reported it, in seconds.
    time: float
    #: Epochs completed (training) or windows served (inference).
    epoch: int
    #: Values in the order of the job's metrics; NaN where missing.
    values: tuple[float, ...]

    @property
    def value(self) -> float:
        """The main metric's value (the first declared), NaN when absent."""
        return self.values[0] if self.values else float("nan")


@dataclass(slots=True)
class JobNumbers:
    """One running job's numbers, as the last tick's columns gave them."""

    node: int = 0
    #: Its GPUs are ``gpu_count`` slots of the table's GPU list from ``gpu_first``.
    gpu_first: int = 0
    gpu_count: int = 0
    run_ms: int = 0
    gpu_ms: int = 0
    cpu_limit: int | None = None
    memory_limit: int | None = None
    cpu_used: int = 0
    memory_used: int = 0
    gpu_share: int | None = None
    gpu_used: float = 0.0
    #: Its global batch size in force (0: none the host knows).
    batch_size: int = 0


@dataclass(slots=True, frozen=True)
class QueueNumbers:
    """A queued job's numbers, as the last tick's queue columns gave them."""

    reason: WaitReason
    since_ms: int
    run_ms: int
    gpu_ms: int


@dataclass(slots=True)
class JobEntry:
    """One live job: its declaration, numbers and history."""

    spec: JobSpec
    first_seen: float
    state: JobNumbers = field(default_factory=JobNumbers)
    #: Why and since when it waits, while it is queued.
    queued: QueueNumbers | None = None
    history: deque[ProgressRecord] = field(default_factory=lambda: deque(maxlen=HISTORY_LIMIT))
    fresh: int = 0


def own_spec(spec: Any) -> JobSpec:
    """A job declaration (generated or the SDK's own) as the SDK's own, enums by value."""
    tiers = spec.tiers
    scaling = spec.scaling
    return JobSpec(
        handle=spec.handle,
        name=spec.name,
        model=spec.model,
        kind=JobKind(spec.kind.value),
        metrics=[MetricSpec(m.name, Direction(m.direction.value)) for m in spec.metrics],
        tiers=None if tiers is None else Tiers(tiers.deliverable, tiers.final),
        qoe_target=spec.qoe_target,
        max_epochs=spec.max_epochs,
        labels=[(k, v) for k, v in spec.labels],
        arrival_ms=spec.arrival_ms,
        gpus=spec.gpus,
        replicas=spec.replicas,
        scaling=Scaling(list(scaling.gpu_counts), scaling.batch_size_min, scaling.batch_size_max),
        # A delta from before tenants (an older recording) names none: the default one.
        tenant=getattr(spec, "tenant", None) or "default",
    )


def _columns_agree(c: Any) -> bool:
    rows = len(c.handle)
    columns = (
        c.node,
        c.cpu_limit_millicores,
        c.memory_limit_bytes,
        c.cpu_used_millicores,
        c.memory_used_bytes,
        c.gpu_count,
        c.gpu_share_percent,
        c.gpu_used_percent,
        c.run_ms,
        c.gpu_ms,
        c.batch_size,
    )
    return (
        all(len(col) == rows for col in columns)
        and len(c.gpu_node) == len(c.gpu_index)
        and sum(c.gpu_count) == len(c.gpu_node)
    )


def _numbers(c: Any, i: int, gpu_first: int) -> JobNumbers:
    cpu_limit = c.cpu_limit_millicores[i]
    memory_limit = c.memory_limit_bytes[i]
    share = c.gpu_share_percent[i]
    return JobNumbers(
        node=c.node[i],
        gpu_first=gpu_first,
        gpu_count=c.gpu_count[i],
        run_ms=c.run_ms[i],
        gpu_ms=c.gpu_ms[i],
        cpu_limit=cpu_limit if cpu_limit != 0 else None,
        memory_limit=memory_limit if memory_limit != 0 else None,
        cpu_used=c.cpu_used_millicores[i],
        memory_used=c.memory_used_bytes[i],
        gpu_share=share if share != 0 else None,
        gpu_used=c.gpu_used_percent[i],
        batch_size=c.batch_size[i],
    )


class JobTable:
    """Every live job, in handle order, with its history: the guest-side half of the cost
    rule."""

    __slots__ = ("entries", "gpus", "running", "_by_handle")

    def __init__(self) -> None:
        self.entries: list[JobEntry] = []
        #: The GPUs running jobs hold, each job's in a run (``JobNumbers.gpu_first``).
        self.gpus: list[GpuSlot] = []
        self.running = 0
        self._by_handle: dict[int, JobEntry] = {}

    def get(self, handle: int) -> JobEntry | None:
        """The live job with this handle."""
        return self._by_handle.get(handle)

    def apply(self, raw: Any) -> tuple[float, float]:
        """Folds one tick's delta into the table and returns (time, interval) in seconds.
        Refuses columns of unequal length and a handle no host gives (host bugs) without
        touching the table."""
        now = from_millis(raw.time_ms)
        jobs = raw.jobs
        if not _columns_agree(jobs):
            raise MalformedSnapshot("job-state columns differ in length")
        p = raw.progress
        records = len(p.job)
        if len(p.time_ms) != records or len(p.epoch) != records or len(p.value_count) != records:
            raise MalformedSnapshot("progress columns differ in length")
        if sum(p.value_count) != len(p.values):
            raise MalformedSnapshot("progress values do not add up to the value counts")
        q = raw.queue
        queued = len(q.handle)
        if (
            len(q.reason) != queued
            or len(q.since_ms) != queued
            or len(q.run_ms) != queued
            or len(q.gpu_ms) != queued
        ):
            raise MalformedSnapshot("queue columns differ in length")
        if any(spec.handle == _NO_HANDLE for spec in raw.added):
            raise MalformedSnapshot(f"a job handle is {_NO_HANDLE}, past the last one a host gives")

        entries = self.entries
        changed = False
        if raw.resync:
            entries.clear()
            changed = True
        if raw.removed:
            gone = set(raw.removed)
            entries[:] = [e for e in entries if e.spec.handle not in gone]
            changed = True
        if raw.added:
            last = entries[-1].spec.handle if entries else None
            in_order = True
            for spec in raw.added:
                in_order = in_order and (last is None or spec.handle > last)
                last = spec.handle
                entries.append(JobEntry(spec=own_spec(spec), first_seen=now))
            if not in_order:
                # A stable sort, then the first of each handle kept, as Rust's dedup does.
                entries.sort(key=lambda e: e.spec.handle)
                seen: set[int] = set()
                kept = []
                for e in entries:
                    if e.spec.handle not in seen:
                        seen.add(e.spec.handle)
                        kept.append(e)
                entries[:] = kept
            changed = True
        if changed:
            self._by_handle = {e.spec.handle: e for e in entries}
        for entry in entries:
            entry.fresh = 0

        # The host sends rows in handle order, so the common case is a straight zip.
        gpu_first = 0
        self.running = len(jobs.handle)
        count = len(entries)
        gpu_count = jobs.gpu_count
        for i, handle in enumerate(jobs.handle):
            entry = entries[i] if i < count and entries[i].spec.handle == handle else self._by_handle.get(handle)
            if entry is not None:
                entry.state = _numbers(jobs, i, gpu_first)
                entry.queued = None
            gpu_first += gpu_count[i]
        self.gpus = [GpuSlot(node, index) for node, index in zip(jobs.gpu_node, jobs.gpu_index)]
        for i in range(queued):
            entry = self._by_handle.get(q.handle[i])
            if entry is not None:
                entry.queued = QueueNumbers(
                    reason=WaitReason(q.reason[i].value),
                    since_ms=q.since_ms[i],
                    run_ms=q.run_ms[i],
                    gpu_ms=q.gpu_ms[i],
                )
        offset = 0
        values = p.values
        for i in range(records):
            n = p.value_count[i]
            record_values = tuple(values[offset : offset + n])
            offset += n
            entry = self._by_handle.get(p.job[i])
            if entry is not None:
                # The deque's maxlen drops the oldest record, as Rust's pop_front does.
                entry.history.append(ProgressRecord(from_millis(p.time_ms[i]), p.epoch[i], record_values))
                entry.fresh = min(entry.fresh + 1, HISTORY_LIMIT)
        return now, from_millis(raw.interval_ms)


class NodeTable:
    """The nodes and the tenants as last sent (they cross only when they change) and every
    GPU's use this tick."""

    __slots__ = ("nodes", "first_gpu", "utilisation", "memory_used", "down", "tenants")

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        #: Node i's GPUs are ``first_gpu[i]:first_gpu[i + 1]`` of the GPU columns.
        self.first_gpu: list[int] = []
        self.utilisation: list[float] = []
        self.memory_used: list[int] = []
        #: The nodes that cannot take work now, ascending.
        self.down: list[int] = []
        #: The tenants, as last sent (generated ``Tenant`` records or :class:`raw.Tenant`).
        self.tenants: list[Any] = []

    def apply(self, raw: Any) -> None:
        """Takes the tick's nodes and tenants (when they changed) and GPU columns. Refuses GPU
        columns that do not match the nodes' GPU counts (a host bug) without touching the
        table."""
        nodes = raw.nodes
        first_gpu = None
        if nodes is not None:
            first_gpu = [0]
            for n in nodes:
                first_gpu.append(first_gpu[-1] + len(n.gpu_memory_bytes))
        starts = first_gpu if first_gpu is not None else self.first_gpu
        total = starts[-1] if starts else 0
        gpus = raw.gpus
        used, memory = len(gpus.utilisation_percent), len(gpus.memory_used_bytes)
        if used != total or memory != total:
            raise MalformedSnapshot(
                f"GPU columns ({used} and {memory} entries) do not match the nodes' {total} GPUs"
            )
        if nodes is not None and first_gpu is not None:
            self.nodes = list(nodes)
            self.first_gpu = first_gpu
        self.down = sorted(raw.nodes_down)
        # None: the list did not change (a delta from before tenants has none either).
        tenants = getattr(raw, "tenants", None)
        if tenants is not None:
            self.tenants = list(tenants)
        self.utilisation = list(gpus.utilisation_percent)
        self.memory_used = list(gpus.memory_used_bytes)
