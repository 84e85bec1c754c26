"""The typed view a policy reads: :class:`Snapshot`, :class:`Job`, :class:`Node`,
:class:`Tenant`. Times are float seconds, CPU int millicores, memory int bytes; ids are ints
(handles)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from . import stats
from .enums import Direction, JobKind, WaitReason
from .raw import MetricSpec, Scaling, Tiers
from .rules import Entitlement, Ledger
from .table import HISTORY_LIMIT, GpuSlot, JobEntry, JobTable, NodeTable, ProgressRecord
from .units import fraction_of, from_millis

__all__ = [
    "HISTORY_LIMIT",
    "Gpu",
    "GpuSlot",
    "Job",
    "Node",
    "ProgressRecord",
    "Snapshot",
    "Tenant",
]


@dataclass(slots=True, frozen=True)
class Gpu:
    """One GPU: its memory and its measured use over the last interval."""

    #: Busy time over the last interval, in percent.
    utilisation_percent: float
    #: Memory in use, bytes.
    memory_used: int
    #: Memory present, bytes.
    memory_total: int


class Node:
    """A node and its capacity."""

    __slots__ = ("id", "_table")

    def __init__(self, node_id: int, table: NodeTable) -> None:
        #: Its handle: its index in the node list.
        self.id = node_id
        self._table = table

    def __repr__(self) -> str:
        return f"Node(id={self.id}, name={self.name!r})"

    @property
    def name(self) -> str:
        """Its name."""
        return self._table.nodes[self.id].name

    @property
    def cpu(self) -> int:
        """CPU capacity, millicores."""
        return self._table.nodes[self.id].cpu_millicores

    @property
    def memory(self) -> int:
        """Memory capacity, bytes."""
        return self._table.nodes[self.id].memory_bytes

    @property
    def gpu_type(self) -> str:
        """The type of its GPUs as the cluster names it ("t4", "a100"); empty when unknown."""
        return self._table.nodes[self.id].gpu_type

    @property
    def takes_work(self) -> bool:
        """Whether it can take work now: False while it is NotReady or cordoned (the host
        refuses to place, migrate or resize onto it; its jobs still run)."""
        return self.id not in self._table.down

    @property
    def gpus(self) -> list[Gpu]:
        """Its GPUs, with their utilisation and memory over the last interval."""
        t = self._table
        first = t.first_gpu[self.id]
        return [
            Gpu(t.utilisation[first + k], t.memory_used[first + k], total)
            for k, total in enumerate(t.nodes[self.id].gpu_memory_bytes)
        ]


class Tenant:
    """A tenant (team, queue, virtual cluster) and what it is entitled to."""

    __slots__ = ("index", "_raw")

    def __init__(self, index: int, raw: Any) -> None:
        #: Its index in :meth:`Snapshot.tenants` (and in :meth:`Snapshot.ledger`).
        self.index = index
        self._raw = raw

    def __repr__(self) -> str:
        return f"Tenant(index={self.index}, name={self.name!r})"

    @property
    def name(self) -> str:
        """Its name."""
        return self._raw.name

    @property
    def weight(self) -> float:
        """Its weight against the other tenants' (fair share); the host keeps it above 0."""
        return self._raw.weight

    @property
    def quota(self) -> int | None:
        """The GPUs guaranteed to it; None: no quota (and no limit)."""
        return self._raw.quota_gpus

    @property
    def borrowing_limit(self) -> int | None:
        """The most GPUs it may borrow beyond its quota within its cohort; None: as many as
        the cohort has idle."""
        return self._raw.borrowing_limit_gpus

    @property
    def cohort(self) -> str | None:
        """Its cohort, the tenants that lend each other their idle quota; None: none."""
        return self._raw.cohort or None

    def limit(self) -> int | None:
        """The most GPUs it may hold by its own entitlement (its cohort may allow fewer); None
        when unlimited."""
        return self.entitlement().limit()

    def entitlement(self) -> Entitlement:
        """Its limits as the shared rules (:class:`wasmsched.rules.Ledger`) read them."""
        return Entitlement(self.name, self.quota, self.borrowing_limit, self.cohort)

    def usable_demand(self, held: int, asks: Iterable[int], capacity: int) -> int:
        """The GPUs it can use now (:meth:`wasmsched.rules.Entitlement.usable_demand`)."""
        return self.entitlement().usable_demand(held, asks, capacity)


class Job:
    """One live job: its declaration, placement, limits, measured use and progress history."""

    __slots__ = ("_entry", "_table")

    def __init__(self, entry: JobEntry, table: JobTable) -> None:
        self._entry = entry
        self._table = table

    def __repr__(self) -> str:
        return f"Job(id={self.id}, name={self.name!r}{', queued' if self.is_queued else ''})"

    @property
    def id(self) -> int:
        """Its handle."""
        return self._entry.spec.handle

    @property
    def name(self) -> str:
        """Its name as declared."""
        return self._entry.spec.name

    @property
    def model(self) -> str:
        """The model or application it runs."""
        return self._entry.spec.model

    @property
    def kind(self) -> JobKind:
        """Training or inference."""
        return self._entry.spec.kind

    @property
    def metrics(self) -> Sequence[MetricSpec]:
        """The metrics it reports; the first is the main one."""
        return self._entry.spec.metrics

    @property
    def direction(self) -> Direction:
        """The direction of the main metric (higher-is-better when none is declared)."""
        metrics = self._entry.spec.metrics
        return metrics[0].direction if metrics else Direction.HIGHER_IS_BETTER

    @property
    def tiers(self) -> Tiers | None:
        """TRADL's two-tier targets, if declared."""
        return self._entry.spec.tiers

    @property
    def qoe_target(self) -> float | None:
        """DQoES target: seconds per epoch (training) or milliseconds per request."""
        return self._entry.spec.qoe_target

    @property
    def max_epochs(self) -> int | None:
        """The epoch cap, if declared."""
        return self._entry.spec.max_epochs

    @property
    def tenant(self) -> str:
        """The tenant it belongs to ("default" when it names none)."""
        return self._entry.spec.tenant

    def label(self, key: str) -> str | None:
        """A label from the job's declaration."""
        for k, v in self._entry.spec.labels:
            if k == key:
                return v
        return None

    @property
    def node(self) -> int:
        """The node it runs on."""
        return self._entry.state.node

    @property
    def cpu_limit(self) -> int | None:
        """Its CPU limit in millicores; None means unlimited."""
        return self._entry.state.cpu_limit

    @property
    def memory_limit(self) -> int | None:
        """Its memory limit in bytes; None means unlimited."""
        return self._entry.state.memory_limit

    @property
    def cpu_use(self) -> int:
        """Mean CPU use over the last interval, millicores."""
        return self._entry.state.cpu_used

    @property
    def memory_use(self) -> int:
        """Memory use at the end of the last interval, bytes."""
        return self._entry.state.memory_used

    @property
    def gpus(self) -> list[GpuSlot]:
        """The GPUs it holds while it runs (none while queued)."""
        if self._entry.queued is not None:
            return []
        s = self._entry.state
        end = s.gpu_first + s.gpu_count
        held = self._table.gpus
        return held[s.gpu_first : end] if end <= len(held) else []

    @property
    def gpu_share(self) -> int | None:
        """Its share of its GPUs in percent, if regulated."""
        return self._entry.state.gpu_share

    @property
    def gpus_asked(self) -> int:
        """The GPUs it asks for, in all."""
        return self._entry.spec.gpus

    @property
    def scaling(self) -> Scaling:
        """The GPU counts and batch sizes it can run at (a rigid job: its GPU count alone)."""
        return self._entry.spec.scaling

    @property
    def is_elastic(self) -> bool:
        """Whether it may be resized to another GPU count."""
        return len(self._entry.spec.scaling.gpu_counts) > 1

    @property
    def batch_size(self) -> int:
        """Its global batch size in force (0: none the host knows; 0 while queued)."""
        return 0 if self._entry.queued is not None else self._entry.state.batch_size

    @property
    def replicas(self) -> int:
        """Into how many pieces it may be split across nodes (1: one node)."""
        return max(self._entry.spec.replicas, 1)

    @property
    def arrival(self) -> float:
        """When it arrived, seconds."""
        return from_millis(self._entry.spec.arrival_ms)

    @property
    def is_queued(self) -> bool:
        """Whether it waits in the queue."""
        return self._entry.queued is not None

    @property
    def wait_reason(self) -> WaitReason | None:
        """Why it waits, while queued."""
        q = self._entry.queued
        return None if q is None else q.reason

    def wait(self, now: float) -> float:
        """How long it has waited at ``now`` since it arrived or was preempted; zero while it
        runs."""
        q = self._entry.queued
        if q is None:
            return 0.0
        waited = now - from_millis(q.since_ms)
        return waited if waited > 0.0 else 0.0

    @property
    def run_time(self) -> float:
        """How long it has run, in all its runs, seconds."""
        q = self._entry.queued
        return from_millis(self._entry.state.run_ms if q is None else q.run_ms)

    @property
    def attained_service(self) -> float:
        """GPU-seconds received, each GPU held counting (its run time when it holds none), as
        Tiresias ranks jobs."""
        q = self._entry.queued
        return from_millis(self._entry.state.gpu_ms if q is None else q.gpu_ms)

    @property
    def gpu_use_percent(self) -> float:
        """GPU use attributed to it over the last interval, in percent."""
        return self._entry.state.gpu_used

    @property
    def first_seen(self) -> float:
        """When this policy instance first saw it."""
        return self._entry.first_seen

    @property
    def history(self) -> Sequence[ProgressRecord]:
        """Its progress records, oldest first (at most :data:`HISTORY_LIMIT`). Read only."""
        return self._entry.history

    @property
    def new_records(self) -> list[ProgressRecord]:
        """The records that arrived on this tick."""
        h = self._entry.history
        return list(islice(h, len(h) - self._entry.fresh, None))

    @property
    def latest(self) -> ProgressRecord | None:
        """Its latest record."""
        h = self._entry.history
        return h[-1] if h else None

    @property
    def epoch(self) -> int:
        """Epochs completed, by its latest record (0 before the first)."""
        h = self._entry.history
        return h[-1].epoch if h else 0

    def normalised(self) -> list[tuple[float, float]]:
        """The main metric over time as (time, value), normalised to (0, 1] for a
        lower-is-better metric (divided by the largest value seen so far) and as reported for
        a higher-is-better one."""
        norm = stats.Normaliser(self.direction)
        out = []
        for r in self._entry.history:
            v = norm.push(r.values[0] if r.values else float("nan"))
            if v is not None:
                out.append((r.time, v))
        return out

    def window_mean(self, start: float, end: float) -> float | None:
        """Mean normalised main metric over ``(start, end]``, if any record fell in it."""
        return stats.window_mean(self.normalised(), start, end)

    def progress_rate(self, now: float, window: float) -> float | None:
        """FlowCon's progress over the window of length ``window`` ending now:
        |E_i − E_{i−1}| / window, with E the windowed mean of the normalised metric. None
        until both windows hold a record."""
        series = self.normalised()
        current = stats.window_mean(series, now - window, now)
        if current is None:
            return None
        previous = stats.window_mean(series, now - window - window, now - window)
        if previous is None:
            return None
        return stats.growth_rate(previous, current, window)

    def growth_efficiency(self, now: float, window: float, node_cpu: int) -> float:
        """FlowCon's growth efficiency, which TRADL shares: :meth:`progress_rate` per
        **minute**, divided by the fraction of ``node_cpu`` the job used over the last
        interval. Zero until both windows hold a record, or while the job used about no
        CPU."""
        rate = self.progress_rate(now, window)
        if rate is None:
            return 0.0
        return stats.growth_efficiency(60.0 * rate, fraction_of(self.cpu_use, node_cpu))


class Snapshot:
    """What a policy sees on a tick: the time, the nodes and every live job."""

    __slots__ = ("time", "interval", "_nodes", "_table")

    def __init__(self, time: float, interval: float, nodes: NodeTable, table: JobTable) -> None:
        #: The host's clock (virtual in the simulator), seconds.
        self.time = time
        #: Time since this policy's previous call (zero on the first), seconds.
        self.interval = interval
        self._nodes = nodes
        self._table = table

    def nodes(self) -> list[Node]:
        """Every node, in handle order."""
        return [Node(i, self._nodes) for i in range(len(self._nodes.nodes))]

    def node(self, node_id: int) -> Node | None:
        """One node, if it exists."""
        return Node(node_id, self._nodes) if 0 <= node_id < len(self._nodes.nodes) else None

    @property
    def nodes_down(self) -> list[int]:
        """The nodes that cannot take work now (NotReady, cordoned), ascending."""
        return list(self._nodes.down)

    def tenants(self) -> list[Tenant]:
        """Every tenant, declared ones first; every job's tenant is among them."""
        return [Tenant(i, t) for i, t in enumerate(self._nodes.tenants)]

    def tenant(self, name: str) -> Tenant | None:
        """Tenant ``name``, if there is one."""
        i = self.tenant_index(name)
        return None if i is None else Tenant(i, self._nodes.tenants[i])

    def tenant_index(self, name: str) -> int | None:
        """The index of tenant ``name`` in :meth:`tenants`."""
        return next((i for i, t in enumerate(self._nodes.tenants) if t.name == name), None)

    def ledger(self) -> Ledger:
        """Each tenant's limits and the GPUs its running jobs hold now, indexed as
        :meth:`tenants`: ``ledger.room(t)`` is how many more GPUs tenant ``t`` may take before
        the host refuses a placement (None: no limit)."""
        tenants = self._nodes.tenants
        ledger = Ledger(Tenant(i, t).entitlement() for i, t in enumerate(tenants))
        if ledger.limits_anything():
            index = {}
            for i, t in enumerate(tenants):
                index.setdefault(t.name, i)
            for job in self.jobs():
                t = index.get(job.tenant)
                if t is not None:
                    ledger.hold(t, len(job.gpus))
        return ledger

    def room(self, tenant: str) -> int | None:
        """How many more GPUs tenant ``tenant`` may take before the host refuses a placement,
        by what its running jobs hold now; None when no limit applies (no quota, or no such
        tenant). To plan several placements, take :meth:`ledger` once and ``hold`` on it."""
        i = self.tenant_index(tenant)
        return None if i is None else self.ledger().room(i)

    def jobs(self) -> Iterator[Job]:
        """Every running job, in handle order."""
        table = self._table
        return (Job(e, table) for e in table.entries if e.queued is None)

    def queue(self) -> Iterator[Job]:
        """Every job that waits to be placed, in handle order (arrival order; a preempted job
        keeps its place)."""
        table = self._table
        return (Job(e, table) for e in table.entries if e.queued is not None)

    @property
    def queue_len(self) -> int:
        """How many jobs wait to be placed."""
        return len(self._table.entries) - self._table.running

    @property
    def job_count(self) -> int:
        """How many jobs run."""
        return self._table.running

    def gpu_holders(self, node: int) -> list[int]:
        """How many running jobs hold each GPU of ``node``, in GPU order."""
        n = self.node(node)
        held = [0] * (len(self._nodes.nodes[node].gpu_memory_bytes) if n is not None else 0)
        for g in self._table.gpus:
            if g.node == node and 0 <= g.index < len(held):
                held[g.index] += 1
        return held

    def free_gpus(self, node: int) -> list[int]:
        """The GPUs of ``node`` that no running job holds, in GPU order."""
        return [i for i, h in enumerate(self.gpu_holders(node)) if h == 0]

    def jobs_on(self, node: int) -> Iterator[Job]:
        """The running jobs placed on ``node``, in handle order."""
        return (j for j in self.jobs() if j.node == node)

    def job(self, job_id: int) -> Job | None:
        """One job, if it is live (running or queued)."""
        entry = self._table.get(job_id)
        return None if entry is None else Job(entry, self._table)
