"""The contract's records as plain dataclasses, with the same attribute names as the classes
componentize-py generates from ``wit/0.3.0/policy.wit``.

Natively (tests, the harness) the SDK builds snapshots from these; inside a component the
host's snapshot arrives as the generated classes. The job table reads attributes only (and
enums by ``.value``), so it takes either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .enums import Direction, JobKind, WaitReason


@dataclass(slots=True)
class MetricSpec:
    """A metric a job reports, declared once."""

    name: str
    direction: Direction


@dataclass(slots=True, frozen=True)
class Tiers:
    """TRADL's two-tier targets on the job's main metric."""

    deliverable: float
    final: float


@dataclass(slots=True)
class Scaling:
    """What a job can be resized to: the GPU counts it can run on, ascending (``[0]`` for a
    CPU job), and the global batch sizes it accepts (0, 0: none to set). A rigid job lists one
    count (its ``gpus``); an elastic one several."""

    gpu_counts: list[int] = field(default_factory=list)
    batch_size_min: int = 0
    batch_size_max: int = 0


@dataclass(slots=True)
class JobSpec:
    """Everything about a job that does not change while it runs."""

    handle: int
    name: str
    model: str
    kind: JobKind = JobKind.TRAINING
    metrics: list[MetricSpec] = field(default_factory=list)
    tiers: Tiers | None = None
    qoe_target: float | None = None
    max_epochs: int | None = None
    labels: list[tuple[str, str]] = field(default_factory=list)
    arrival_ms: int = 0
    gpus: int = 0
    replicas: int = 1
    scaling: Scaling = field(default_factory=Scaling)
    #: The tenant (team, queue) it belongs to: a name in ``Snapshot.tenants``.
    tenant: str = "default"


@dataclass(slots=True)
class Tenant:
    """Whose jobs share an entitlement (a team, a queue): its weight against the other
    tenants' (fair share), the GPUs guaranteed to it (``quota_gpus``; None: no quota, no
    limit), how many it may borrow beyond them within its cohort (``borrowing_limit_gpus``;
    None: as many as the cohort has idle) and its cohort (empty: none)."""

    name: str
    weight: float = 1.0
    quota_gpus: int | None = None
    borrowing_limit_gpus: int | None = None
    cohort: str = ""


@dataclass(slots=True)
class Node:
    """A node and its capacity; ``gpu_memory_bytes`` has one entry per GPU, ``gpu_type`` names
    them ("a100"; empty when unknown)."""

    name: str
    cpu_millicores: int
    memory_bytes: int
    gpu_memory_bytes: list[int] = field(default_factory=list)
    gpu_type: str = ""


@dataclass(slots=True)
class GpuStates:
    """Every GPU's measured use, in node order and then GPU order."""

    utilisation_percent: list[float] = field(default_factory=list)
    memory_used_bytes: list[int] = field(default_factory=list)


@dataclass(slots=True)
class JobStates:
    """Every running job's numbers, one list per field, in handle order."""

    handle: list[int] = field(default_factory=list)
    node: list[int] = field(default_factory=list)
    cpu_limit_millicores: list[int] = field(default_factory=list)
    memory_limit_bytes: list[int] = field(default_factory=list)
    cpu_used_millicores: list[int] = field(default_factory=list)
    memory_used_bytes: list[int] = field(default_factory=list)
    gpu_count: list[int] = field(default_factory=list)
    gpu_node: list[int] = field(default_factory=list)
    gpu_index: list[int] = field(default_factory=list)
    gpu_share_percent: list[int] = field(default_factory=list)
    gpu_used_percent: list[float] = field(default_factory=list)
    run_ms: list[int] = field(default_factory=list)
    gpu_ms: list[int] = field(default_factory=list)
    #: Its global batch size in force (0: none the host knows).
    batch_size: list[int] = field(default_factory=list)


@dataclass(slots=True)
class QueueStates:
    """Every job that waits, one list per field, in handle order."""

    handle: list[int] = field(default_factory=list)
    reason: list[WaitReason] = field(default_factory=list)
    since_ms: list[int] = field(default_factory=list)
    run_ms: list[int] = field(default_factory=list)
    gpu_ms: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ProgressRecords:
    """Progress reports, oldest first; record i's values follow record i-1's."""

    job: list[int] = field(default_factory=list)
    time_ms: list[int] = field(default_factory=list)
    epoch: list[int] = field(default_factory=list)
    value_count: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


@dataclass(slots=True)
class Snapshot:
    """What a policy is sent on a tick: the delta since its previous call."""

    time_ms: int = 0
    interval_ms: int = 0
    resync: bool = False
    nodes: list[Node] | None = None
    #: The nodes that cannot take work now (NotReady, cordoned), ascending.
    nodes_down: list[int] = field(default_factory=list)
    #: The tenants, when the list changed since the previous call (always on a resync); None
    #: when it did not, and the last list sent still holds.
    tenants: list[Tenant] | None = None
    gpus: GpuStates = field(default_factory=GpuStates)
    added: list[JobSpec] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    jobs: JobStates = field(default_factory=JobStates)
    queue: QueueStates = field(default_factory=QueueStates)
    progress: ProgressRecords = field(default_factory=ProgressRecords)

