"""Build snapshots natively, so a policy's logic is tested with plain ``pytest``.

A :class:`TestWorld` plays the host: nodes, tenants, jobs with their declarations, measured
use and progress reports, a queue of jobs that wait, and a clock. Its :meth:`TestWorld.snapshot` is
the delta a real host sends (a resync on the first call). :class:`Harness` runs a policy
against it tick by tick and, like the host, puts what the policy decides into force: limits,
migrations, placements, preemptions and stops::

    world = TestWorld()
    world.node("n0", cpu=8000, memory=gib(32))
    a = world.add_job(job("a", "cifar10").metric("accuracy", Direction.HIGHER_IS_BETTER))
    world.report(a, 1, [0.42])
    h = Harness(MyPolicy(), world)
    assert h.tick(30.0).is_empty()
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import decision as d
from .enums import Direction, JobKind, WaitReason
from .policy import Policy, Runner
from .raw import (
    GpuStates,
    JobSpec,
    JobStates,
    MetricSpec,
    Node,
    ProgressRecords,
    QueueStates,
    Scaling,
    Snapshot,
    Tenant,
    Tiers,
)
from .table import GpuSlot, JobNumbers, QueueNumbers
from .units import as_millis, from_millis, gib

__all__ = ["Harness", "JobBuilder", "TenantBuilder", "TestWorld", "job", "placed", "tenant"]


def _f32(x: float) -> float:
    """The value as an f32 column carries it."""
    return struct.unpack("f", struct.pack("f", x))[0]


@dataclass
class JobBuilder:
    """Declares a job: start with :func:`job`, chain what it declares."""

    spec: JobSpec

    def inference(self) -> JobBuilder:
        """Make it an inference service."""
        self.spec.kind = JobKind.INFERENCE
        return self

    def metric(self, name: str, direction: Direction = Direction.HIGHER_IS_BETTER) -> JobBuilder:
        """Declare a metric; the first declared is the main one."""
        self.spec.metrics.append(MetricSpec(name, direction))
        return self

    def tiers(self, deliverable: float, final: float) -> JobBuilder:
        """TRADL's two-tier targets on the main metric."""
        self.spec.tiers = Tiers(deliverable, final)
        return self

    def qoe_target(self, target: float) -> JobBuilder:
        """DQoES's QoE target."""
        self.spec.qoe_target = target
        return self

    def max_epochs(self, n: int) -> JobBuilder:
        """The epoch cap."""
        self.spec.max_epochs = n
        return self

    def gpus(self, n: int) -> JobBuilder:
        """The GPUs it asks for, in all."""
        self.spec.gpus = n
        return self

    def replicas(self, n: int) -> JobBuilder:
        """Into how many pieces it may be split across nodes."""
        self.spec.replicas = n
        return self

    def elastic(self, gpu_counts: Sequence[int], batch_sizes: tuple[int, int]) -> JobBuilder:
        """Make it elastic: it runs on any of ``gpu_counts`` GPUs (its ``gpus`` among them) at
        a global batch size in ``batch_sizes`` (min, max, both included), starting at the
        smallest."""
        low, high = batch_sizes
        self.spec.scaling = Scaling(list(gpu_counts), low, high)
        return self

    def label(self, key: str, value: str) -> JobBuilder:
        """A free-form label."""
        self.spec.labels.append((key, value))
        return self

    def tenant(self, name: str) -> JobBuilder:
        """The tenant it belongs to (default "default")."""
        self.spec.tenant = name
        return self


def job(name: str, model: str) -> JobBuilder:
    """A training job named ``name`` running ``model``, with no metrics or targets yet."""
    return JobBuilder(JobSpec(handle=0, name=name, model=model))


@dataclass
class TenantBuilder:
    """Declares a tenant: start with :func:`tenant`, chain what it is entitled to, hand it to
    :meth:`TestWorld.declare`."""

    raw: Tenant

    def weight(self, weight: float) -> TenantBuilder:
        """Its weight against the other tenants'."""
        self.raw.weight = weight
        return self

    def quota(self, gpus: int) -> TenantBuilder:
        """The GPUs guaranteed to it."""
        self.raw.quota_gpus = gpus
        return self

    def borrowing_limit(self, gpus: int) -> TenantBuilder:
        """The most GPUs it may borrow beyond its quota."""
        self.raw.borrowing_limit_gpus = gpus
        return self

    def cohort(self, cohort: str) -> TenantBuilder:
        """The cohort it lends to and borrows from."""
        self.raw.cohort = cohort
        return self


def tenant(name: str) -> TenantBuilder:
    """Tenant ``name``: weight 1, no quota, no cohort."""
    return TenantBuilder(Tenant(name))


@dataclass
class _TestJob:
    spec: JobSpec
    state: JobNumbers = field(default_factory=JobNumbers)
    gpus: list[GpuSlot] = field(default_factory=list)
    queued: QueueNumbers | None = None


class TestWorld:
    """A host in miniature: it produces the same deltas a real host sends."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.time_ms = 0
        self._last_call_ms: int | None = None
        self._nodes: list[Node] = []
        self._nodes_sent = 0
        #: Per node, each GPU's [utilisation percent, memory used].
        self._gpu_use: list[list[tuple[float, int]]] = []
        self._jobs: dict[int, _TestJob] = {}
        self._next_handle = 0
        self._added: list[int] = []
        self._removed: list[int] = []
        self._progress: ProgressRecords | None = None
        #: The nodes that cannot take work, ascending.
        self._down: list[int] = []
        #: Declared tenants first, then those jobs named undeclared, as the host keeps them.
        self._tenants: list[Tenant] = []
        self._declared = 0
        self._tenants_changed = False

    @classmethod
    def gpu_cluster(cls, gpus: Sequence[int]) -> TestWorld:
        """Nodes ``n0``, ``n1``, … with these GPU counts (16 GiB each), 8 cores and 64 GiB
        apiece."""
        w = cls()
        for i, n in enumerate(gpus):
            w.node(f"n{i}", 8000, gib(64), [gib(16)] * n)
        return w

    def node(self, name: str, cpu: int, memory: int, gpus: Sequence[int] = ()) -> int:
        """Add a node with ``cpu`` millicores, ``memory`` bytes and GPUs of the given memory
        sizes (idle); returns its id."""
        self._nodes.append(Node(name, cpu, memory, list(gpus)))
        self._gpu_use.append([(0.0, 0)] * len(gpus))
        return len(self._nodes) - 1

    def declare(self, tenant: TenantBuilder) -> None:
        """Declare a tenant (replacing an earlier declaration of the same name); the tenants
        are sent again on the next snapshot."""
        t = copy.deepcopy(tenant.raw)
        i = next((k for k, d in enumerate(self._tenants) if d.name == t.name), None)
        if i is not None and i < self._declared:
            self._tenants[i] = t
        else:
            if i is not None:
                del self._tenants[i]
            self._tenants.insert(self._declared, t)
            self._declared += 1
        self._tenants_changed = True

    def _name_tenant(self, name: str) -> None:
        """A job names tenant ``name``: added undeclared (weight 1, no quota) when new."""
        if all(t.name != name for t in self._tenants):
            self._tenants.append(Tenant(name))
            self._tenants_changed = True

    def set_gpu_type(self, node: int, gpu_type: str) -> None:
        """Name the type of ``node``'s GPUs ("a100"); nodes start with none. The nodes are
        sent again on the next snapshot, as the host sends them when they change."""
        if not 0 <= node < len(self._nodes):
            raise IndexError(f"node#{node} is not in this TestWorld")
        self._nodes[node].gpu_type = gpu_type
        self._nodes_sent = -1

    def set_takes_work(self, node: int, takes_work: bool) -> None:
        """Say whether ``node`` can take work (False: NotReady or cordoned)."""
        if takes_work:
            self._down = [n for n in self._down if n != node]
        elif node not in self._down:
            self._down = sorted([*self._down, node])

    def set_gpu_use(self, node: int, gpu: int, utilisation_percent: float, memory_used: int) -> None:
        """Set a GPU's measured use over the last interval."""
        if not (0 <= node < len(self._gpu_use) and 0 <= gpu < len(self._gpu_use[node])):
            raise IndexError(f"node#{node} has no GPU {gpu} in this TestWorld")
        self._gpu_use[node][gpu] = (_f32(utilisation_percent), memory_used)

    def add_job(self, spec: JobBuilder, node: int = 0) -> int:
        """Start a job on ``node`` (without GPUs; :meth:`start` gives a queued one GPUs)."""
        handle = self.queue_job(spec)
        self.start(handle, node)
        return handle

    def queue_job(self, spec: JobBuilder) -> int:
        """A job arrives now and waits in the queue; returns its id."""
        handle = self._next_handle
        self._next_handle += 1
        s = copy.deepcopy(spec.spec)
        s.handle = handle
        s.arrival_ms = self.time_ms
        # As the host sends it: the counts ascending, holding the GPUs it asks for.
        s.scaling.gpu_counts = sorted({*s.scaling.gpu_counts, s.gpus})
        if not s.tenant.strip():
            s.tenant = "default"
        self._name_tenant(s.tenant)
        state = JobNumbers(batch_size=s.scaling.batch_size_min)
        queued = QueueNumbers(WaitReason.NEVER_STARTED, self.time_ms, 0, 0)
        self._jobs[handle] = _TestJob(s, state=state, queued=queued)
        self._added.append(handle)
        return handle

    def start(self, job_id: int, node: int, gpus: Sequence[int] = ()) -> None:
        """A queued job starts on ``node`` with these of its GPUs."""
        self._start_on(job_id, node, [GpuSlot(node, g) for g in gpus])

    def _start_on(self, job_id: int, node: int, gpus: list[GpuSlot]) -> None:
        j = self._job(job_id)
        if j.queued is not None:
            j.state.run_ms = j.queued.run_ms
            j.state.gpu_ms = j.queued.gpu_ms
            j.queued = None
        j.state.node = node
        j.gpus = gpus

    def preempt(self, job_id: int) -> None:
        """A running job goes back to the queue, preempted."""
        j = self._job(job_id)
        if j.queued is None:
            j.queued = QueueNumbers(WaitReason.PREEMPTED, self.time_ms, j.state.run_ms, j.state.gpu_ms)
            j.gpus = []

    def _job(self, job_id: int) -> _TestJob:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise KeyError(f"job#{job_id} is not in this TestWorld") from None

    def remove_job(self, job_id: int) -> None:
        """End a job."""
        if self._jobs.pop(job_id, None) is not None:
            self._added = [h for h in self._added if h != job_id]
            self._removed.append(job_id)

    def set_cpu_use(self, job_id: int, used: int) -> None:
        """Set the job's measured CPU use over the last interval, millicores."""
        self._job(job_id).state.cpu_used = used

    def set_cpu_limit(self, job_id: int, limit: int | None) -> None:
        """Set the job's CPU limit as the host would report it (None: unlimited)."""
        self._job(job_id).state.cpu_limit = limit

    def set_memory_use(self, job_id: int, used: int) -> None:
        """Set the job's memory use, bytes."""
        self._job(job_id).state.memory_used = used

    def set_memory_limit(self, job_id: int, limit: int | None) -> None:
        """Set the job's memory limit as the host would report it (None: unlimited)."""
        self._job(job_id).state.memory_limit = limit

    def place(self, job_id: int, node: int) -> None:
        """Move the job to ``node``."""
        self._job(job_id).state.node = node

    def report(self, job_id: int, epoch: int, values: Sequence[float]) -> None:
        """The job reports a record now."""
        p = self._progress if self._progress is not None else ProgressRecords()
        self._progress = p
        p.job.append(job_id)
        p.time_ms.append(self.time_ms)
        p.epoch.append(epoch)
        p.value_count.append(len(values))
        p.values.extend(float(v) for v in values)

    def advance(self, seconds: float) -> None:
        """Move the clock forward; running jobs accrue run time and GPU time."""
        ms = as_millis(seconds)
        self.time_ms += ms
        for j in self._jobs.values():
            if j.queued is None:
                j.state.run_ms += ms
                j.state.gpu_ms += ms * max(len(j.gpus), 1)

    @property
    def time(self) -> float:
        """The clock, seconds."""
        return from_millis(self.time_ms)

    def snapshot(self) -> Snapshot:
        """The delta since the previous snapshot, as the host would send it."""
        interval_ms = 0 if self._last_call_ms is None else self.time_ms - self._last_call_ms
        resync = self._last_call_ms is None
        self._last_call_ms = self.time_ms
        send_nodes = resync or self._nodes_sent != len(self._nodes)
        self._nodes_sent = len(self._nodes)
        # The tenants cross when they changed (a declaration, a job naming a new one).
        send_tenants = resync or self._tenants_changed
        self._tenants_changed = False
        jobs = JobStates()
        queue = QueueStates()
        for handle in sorted(self._jobs):
            j = self._jobs[handle]
            if j.queued is None:
                s = j.state
                jobs.handle.append(handle)
                jobs.node.append(s.node)
                jobs.gpu_count.append(len(j.gpus))
                jobs.gpu_node.extend(g.node for g in j.gpus)
                jobs.gpu_index.extend(g.index for g in j.gpus)
                jobs.run_ms.append(s.run_ms)
                jobs.gpu_ms.append(s.gpu_ms)
                jobs.cpu_limit_millicores.append(s.cpu_limit or 0)
                jobs.memory_limit_bytes.append(s.memory_limit or 0)
                jobs.cpu_used_millicores.append(s.cpu_used)
                jobs.memory_used_bytes.append(s.memory_used)
                jobs.gpu_share_percent.append(s.gpu_share or 0)
                jobs.gpu_used_percent.append(s.gpu_used)
                jobs.batch_size.append(s.batch_size)
            else:
                q = j.queued
                queue.handle.append(handle)
                queue.reason.append(q.reason)
                queue.since_ms.append(q.since_ms)
                queue.run_ms.append(q.run_ms)
                queue.gpu_ms.append(q.gpu_ms)
        added = [copy.deepcopy(self._jobs[h].spec) for h in self._added if h in self._jobs]
        self._added = []
        removed, self._removed = self._removed, []
        progress = self._progress if self._progress is not None else ProgressRecords()
        self._progress = None
        gpus = GpuStates(
            [u for node in self._gpu_use for u, _ in node], [m for node in self._gpu_use for _, m in node]
        )
        return Snapshot(
            time_ms=self.time_ms,
            interval_ms=interval_ms,
            resync=resync,
            nodes=copy.deepcopy(self._nodes) if send_nodes else None,
            nodes_down=list(self._down),
            tenants=copy.deepcopy(self._tenants) if send_tenants else None,
            gpus=gpus,
            added=added,
            removed=removed,
            jobs=jobs,
            queue=queue,
            progress=progress,
        )

    def apply(self, decision: d.Decision) -> None:
        """Put a decision into force, as the host would: limits, migrations, placements,
        preemptions, resizes and stops (it trusts the decision; the host validates it first)."""
        for action in decision.actions:
            j = self._jobs.get(action.job)
            if j is None:
                continue
            kind = action.kind
            if isinstance(kind, d.SetCpu):
                j.state.cpu_limit = kind.limit
            elif isinstance(kind, d.SetMemory):
                j.state.memory_limit = kind.limit
            elif isinstance(kind, d.Migrate):
                j.state.node = kind.node
            elif isinstance(kind, d.Stop):
                self._removed.append(action.job)
            elif isinstance(kind, d.Place):
                first = kind.nodes[0][0] if kind.nodes else 0
                slots = [GpuSlot(n, g) for n, gpus in kind.nodes for g in gpus]
                self._start_on(action.job, first, slots)
            elif isinstance(kind, d.Preempt):
                self.preempt(action.job)
            elif isinstance(kind, d.Resize):
                if kind.nodes:
                    j.state.node = kind.nodes[0][0]
                j.gpus = [GpuSlot(n, g) for n, gpus in kind.nodes for g in gpus]
                if kind.batch_size is not None:
                    j.state.batch_size = kind.batch_size
        for handle in self._removed:
            self._jobs.pop(handle, None)


class Harness:
    """A policy and a :class:`TestWorld`, ticked together."""

    __test__ = False

    def __init__(self, policy: Policy, world: TestWorld) -> None:
        self.runner: Runner[Policy] = Runner(policy)
        #: The world the policy runs in; change it between ticks.
        self.world = world

    @classmethod
    def from_config(cls, policy_type: type[Policy], config_json: str, world: TestWorld | None = None) -> Harness:
        """Build the policy from its config as JSON, as the host does (raises
        :class:`~wasmsched.policy.InvalidConfig`)."""
        h = cls.__new__(cls)
        h.runner = Runner.init(policy_type, config_json)
        h.world = world if world is not None else TestWorld()
        return h

    @property
    def policy(self) -> Policy:
        """The policy, to inspect its state."""
        return self.runner.policy

    def tick(self, seconds: float = 0.0) -> d.Decision:
        """Advance the clock by ``seconds``, call the policy, and put its decision into
        force."""
        self.world.advance(seconds)
        decision = self.runner.decide(self.world.snapshot())
        self.world.apply(decision)
        return decision


class Inspect(Policy):
    """A policy that decides nothing: run it to see a world as a policy sees it."""

    def decide(self, snapshot):
        return d.Decision()


def seen(world: TestWorld) -> Runner:
    """A runner of :class:`Inspect` that took ``world``'s next snapshot: ``seen(w).view()``."""
    runner = Runner(Inspect())
    runner.decide(world.snapshot())
    return runner


def placed(decision: d.Decision) -> list[tuple[int, list[tuple[int, list[int]]]]]:
    """The placements of a decision, in order: each job with its (node, GPUs) entries."""
    return [
        (a.job, [(n, list(g)) for n, g in a.kind.nodes]) for a in decision.actions if isinstance(a.kind, d.Place)
    ]
