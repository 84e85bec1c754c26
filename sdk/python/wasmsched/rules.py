"""The contract's rules, as the host applies them: the GPU book (who holds which GPU), the
tenants' limits (:class:`Ledger`) and the checks every action passes before it applies, each
refusal a :class:`Problem` whose text is the host's, word for word. A port of the Rust crate
``wasmsched-rules`` (``rules/src/book.rs``, ``rules/src/tenants.rs`` and
``rules/src/check.rs``), step for step; the vectors in ``wit/conformance/checks.json``, which
the host writes, hold its outcomes, and this SDK's tests compare.

:func:`check` says whether the host would accept every action of a decision made on a
:class:`~wasmsched.view.Snapshot`; :func:`verdicts` gives each action's outcome. Actions are
checked in order against the world as the earlier accepted ones leave it: a preemption frees
GPUs that a later placement may take, and a job placed, preempted or stopped by the decision
is not acted on again in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from . import decision as d

if TYPE_CHECKING:
    from .view import Snapshot

__all__ = [
    "MIN_CPU_MILLICORES",
    "MIN_MEMORY_BYTES",
    "Checker",
    "Entitlement",
    "GpuBook",
    "JobNow",
    "Ledger",
    "NodeCap",
    "OverLimit",
    "Oversized",
    "Problem",
    "Room",
    "World",
    "check",
    "gpus_per_piece",
    "max_actions",
    "size",
    "verdicts",
]

#: Docker refuses CPU limits below a hundredth of a core.
MIN_CPU_MILLICORES = 10
#: Docker refuses memory limits below 6 MiB.
MIN_MEMORY_BYTES = 6 << 20


def max_actions(jobs: int) -> int:
    """The most actions a decision may hold for ``jobs`` live jobs (running or queued); a
    larger decision is refused whole."""
    return 64 + 8 * jobs


def gpus_per_piece(gpus: int, replicas: int) -> int:
    """How many GPUs each piece of a job of ``gpus`` GPUs in ``replicas`` pieces takes on a
    node: ``gpus / replicas``, or single GPUs when that does not divide."""
    pieces = max(replicas, 1)
    return max(gpus // pieces, 1) if gpus % pieces == 0 else 1


class GpuBook:
    """Who holds each GPU of each node. A GPU is free when nobody holds it; several holders
    share it (a placement with ``share``)."""

    __slots__ = ("_offsets", "_holders")

    def __init__(self, gpus_per_node: Iterable[int]) -> None:
        """A book of nodes with these many GPUs each, all free."""
        offsets = [0]
        for gpus in gpus_per_node:
            offsets.append(offsets[-1] + gpus)
        self._offsets = offsets
        self._holders: list[list[int]] = [[] for _ in range(offsets[-1])]

    def node_count(self) -> int:
        """How many nodes it has."""
        return len(self._offsets) - 1

    def gpus_on(self, node: int) -> int | None:
        """How many GPUs ``node`` has; None when there is no such node."""
        if not 0 <= node < len(self._offsets) - 1:
            return None
        return self._offsets[node + 1] - self._offsets[node]

    def _at(self, node: int, index: int) -> int | None:
        gpus = self.gpus_on(node)
        return self._offsets[node] + index if gpus is not None and 0 <= index < gpus else None

    def exists(self, node: int, index: int) -> bool:
        """Whether GPU ``index`` of ``node`` exists."""
        return self._at(node, index) is not None

    def holders(self, node: int, index: int) -> Sequence[int]:
        """The jobs holding GPU ``index`` of ``node``, the first to take it first (empty for a
        GPU that does not exist)."""
        i = self._at(node, index)
        return () if i is None else tuple(self._holders[i])

    def is_free(self, node: int, index: int) -> bool:
        """Whether GPU ``index`` of ``node`` exists and nobody holds it."""
        i = self._at(node, index)
        return i is not None and not self._holders[i]

    def hold(self, node: int, index: int, job: int) -> None:
        """``job`` holds GPU ``index`` of ``node`` (nothing happens for a GPU that does not
        exist)."""
        i = self._at(node, index)
        if i is not None:
            self._holders[i].append(job)

    def release(self, node: int, index: int, job: int) -> None:
        """``job`` lets go of GPU ``index`` of ``node``, if it held it."""
        i = self._at(node, index)
        if i is not None and job in self._holders[i]:
            self._holders[i].remove(job)

    def take(self, placement: Iterable[tuple[int, Iterable[int]]], job: int) -> None:
        """``job`` holds every GPU of a placement: per node, the indices of its GPUs there."""
        for node, gpus in placement:
            for index in gpus:
                self.hold(node, index, job)

    def free_on(self, node: int) -> list[int]:
        """The free GPUs of ``node``, lowest index first (none for a node that does not
        exist)."""
        return [index for index in range(self.gpus_on(node) or 0) if self.is_free(node, index)]

    def free_count(self, node: int) -> int:
        """How many GPUs of ``node`` are free."""
        return len(self.free_on(node))

    def gpu_count(self) -> int:
        """Every GPU of the cluster, free or not."""
        return len(self._holders)

    def free_total(self) -> int:
        """The GPUs nobody holds."""
        return sum(1 for h in self._holders if not h)


class Entitlement(NamedTuple):
    """What one tenant is entitled to, as the limits need it."""

    #: Its name, for messages.
    name: str
    #: GPUs guaranteed to it; None: no quota, no limit.
    quota: int | None = None
    #: GPUs it may hold beyond its quota, borrowed within its cohort; None: no limit of its own.
    borrowing_limit: int | None = None
    #: Its cohort's name; None: it borrows from nobody.
    cohort: str | None = None

    def limit(self) -> int | None:
        """The most GPUs it may hold by its own entitlement (its cohort may allow fewer); None
        when unlimited: a quota alone without a cohort, quota + borrowing limit with one (no
        borrowing limit: none of its own)."""
        if self.quota is None:
            return None
        if self.cohort is None:
            return self.quota
        return None if self.borrowing_limit is None else self.quota + self.borrowing_limit

    def usable_demand(self, held: int, asks: Iterable[int], capacity: int) -> int:
        """The GPUs it can use now, over which entitlements are shared
        (:func:`wasmsched.stats.entitled`): what it ``held`` plus what its waiting jobs ask
        (``asks``), leaving out any job that alone asks for more than its limit or than the
        ``capacity`` taking work, and in all no more than its limit (or than it holds, when
        that is more)."""
        limit = self.limit()
        most = capacity if limit is None else min(limit, capacity)
        asked = sum(a for a in asks if a <= most)
        return min(held + asked, max(most, held))


class OverLimit(Exception):
    """Why GPUs for a tenant's job are refused: ``kind`` is ``"Tenant"`` (it would pass its own
    limit; ``fields`` tenant, holds, asks, limit, quota) or ``"Cohort"`` (its cohort would
    hold more than its members' quotas; ``fields`` tenant, cohort, holds, asks, quotas).
    ``str()`` is the host's text."""

    def __init__(self, kind: str, **fields: Any) -> None:
        f = fields
        if kind == "Tenant":
            beyond = (
                "its quota" if f["quota"] == f["limit"] else f"quota {f['quota']} + borrowing {f['limit'] - f['quota']}"
            )
            text = (
                f"tenant {f['tenant']} holds {f['holds']} GPUs of its limit of {f['limit']} ({beyond}); "
                f"{f['asks']} more would pass it"
            )
        else:
            text = (
                f"tenant {f['tenant']}'s cohort {f['cohort']} holds {f['holds']} GPUs of its members' "
                f"{f['quotas']} of quota; {f['asks']} more would pass it (nothing idle to borrow)"
            )
        super().__init__(text)
        self.kind = kind
        self.fields = fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OverLimit) and (self.kind, self.fields) == (other.kind, other.fields)

    def __hash__(self) -> int:
        return hash((self.kind, str(self)))

    def __repr__(self) -> str:
        return f"OverLimit({self.kind!r}, {str(self)!r})"


class Ledger:
    """Who holds how many GPUs, per tenant and per cohort, against their limits. A tenant with a
    quota holds at most its quota without a cohort, and at most quota + borrowing limit (no
    borrowing limit: as much as the cohort has idle) with one; the members of a cohort that
    have quotas hold, together, at most the sum of their quotas. A tenant without a quota has
    no limit. Tenants are named by their index in the list given."""

    __slots__ = ("_tenants", "_held", "_cohort_of", "_cohorts")

    def __init__(self, tenants: Iterable[Entitlement] = ()) -> None:
        """A ledger of ``tenants`` (indexed as given) holding nothing."""
        self._tenants = list(tenants)
        self._held = [0] * len(self._tenants)
        #: Per cohort: [its name, the sum of its members' quotas, what those members hold].
        self._cohorts: list[list[Any]] = []
        #: Per tenant, its cohort's index in ``_cohorts``.
        self._cohort_of: list[int | None] = []
        for t in self._tenants:
            if t.cohort is None:
                self._cohort_of.append(None)
                continue
            i = next((k for k, c in enumerate(self._cohorts) if c[0] == t.cohort), None)
            if i is None:
                self._cohorts.append([t.cohort, 0, 0])
                i = len(self._cohorts) - 1
            self._cohorts[i][1] += t.quota or 0
            self._cohort_of.append(i)

    def limits_anything(self) -> bool:
        """Whether any tenant has a limit: when none has, every check passes."""
        return any(t.quota is not None for t in self._tenants)

    @property
    def tenants(self) -> Sequence[Entitlement]:
        """The tenants, in index order."""
        return tuple(self._tenants)

    def _known(self, tenant: int) -> bool:
        return 0 <= tenant < len(self._tenants)

    def held(self, tenant: int) -> int:
        """The GPUs ``tenant``'s running jobs hold (0 for an unknown tenant)."""
        return self._held[tenant] if self._known(tenant) else 0

    def room(self, tenant: int) -> int | None:
        """How many more GPUs ``tenant`` may take; None when no limit applies (no quota, or
        an unknown tenant)."""
        if not self._known(tenant) or self._tenants[tenant].quota is None:
            return None
        limit = self._tenants[tenant].limit()
        own = None if limit is None else max(limit - self._held[tenant], 0)
        c = self._cohort_of[tenant]
        cohort = None if c is None else max(self._cohorts[c][1] - self._cohorts[c][2], 0)
        if own is not None and cohort is not None:
            return min(own, cohort)
        return own if own is not None else cohort

    def check(self, tenant: int, gpus: int) -> None:
        """Raise :class:`OverLimit` when ``tenant`` may not take ``gpus`` more."""
        if not self._known(tenant) or gpus == 0:
            return
        t = self._tenants[tenant]
        if t.quota is None:
            return
        holds = self._held[tenant]
        limit = t.limit()
        if limit is not None and holds + gpus > limit:
            raise OverLimit("Tenant", tenant=t.name, holds=holds, asks=gpus, limit=limit, quota=t.quota)
        c = self._cohort_of[tenant]
        if c is not None:
            cohort, quotas, held = self._cohorts[c]
            if held + gpus > quotas:
                raise OverLimit("Cohort", tenant=t.name, cohort=cohort, holds=held, asks=gpus, quotas=quotas)

    def hold(self, tenant: int, gpus: int) -> None:
        """Count ``gpus`` more held by ``tenant`` (an unknown tenant is ignored)."""
        self._shift(tenant, gpus)

    def release(self, tenant: int, gpus: int) -> None:
        """Count ``gpus`` fewer held by ``tenant`` (never below zero)."""
        self._shift(tenant, -gpus)

    def _shift(self, tenant: int, gpus: int) -> None:
        if not self._known(tenant):
            return
        self._held[tenant] = max(self._held[tenant] + gpus, 0)
        c = self._cohort_of[tenant]
        if self._tenants[tenant].quota is not None and c is not None:
            self._cohorts[c][2] = max(self._cohorts[c][2] + gpus, 0)


#: Each problem's text, as the host's ``Display`` writes it.
_TEXTS = {
    "NoSuchJob": "job {job} does not exist or has ended",
    "AlreadyMoved": "job {job} was already placed, preempted or stopped by this decision",
    "Queued": "job {job} is queued, not running: place it first",
    "CpuBelowMinimum": (
        "a CPU limit of {millicores} millicores is below the minimum of "
        f"{MIN_CPU_MILLICORES}; lift the limit or give more"
    ),
    "CpuAboveNode": "a CPU limit of {millicores} millicores is more than node {node} has ({has})",
    "MemoryBelowMinimum": f"a memory limit of {{bytes}} bytes is below the minimum of {MIN_MEMORY_BYTES}",
    "MemoryAboveNode": "a memory limit of {bytes} bytes is more than node {node} has ({has})",
    "NoSuchNode": "node {node} does not exist ({nodes} nodes)",
    "AlreadyOn": "job {job} already runs on node {node}",
    "SpansNodes": "job {job} spans several nodes; preempt it and place it instead",
    "TooFewFreeGpus": "node {node} has {free} free GPUs; job {job} holds {holds}",
    "NodeFull": "node {node} is full: {used} of {capacity} bytes in use, the job needs {needs}",
    "NoSuchGpu": "node {node} has no GPU {gpu} ({count} GPUs)",
    "ShareOutOfRange": "a GPU share of {percent} % is outside 1\u2013100",
    "PlaceRunning": "job {job} already runs on node {node}; migrate it, or preempt it first",
    "NoNodeNamed": "the placement of job {job} names no node",
    "TooManyNodes": "job {job} runs on at most {pieces} node(s) ({replicas} replicas); the placement names {named}",
    "NodeTwice": "the placement names node {node} twice",
    "TooManyGpus": "node {node} has {count} GPUs; the placement asks for {asked}",
    "NotWholeReplicas": (
        "each node of a spread placement takes whole replicas of {per_piece} GPU(s); node {node} gets {got}"
    ),
    "GpuTwice": "the placement names GPU {gpu} of node {node} twice",
    "GpuHeld": "GPU {gpu} of node {node} is held by job {holder}; name a free GPU, or place with share",
    "WrongGpuCount": "job {job} asks for {asks} GPUs; the placement gives {given}",
    "NodeDown": "node {node} cannot take work now (NotReady or cordoned)",
    "CountNotAllowed": "job {job} runs on {counts} GPUs (its scaling); the placement gives {given}",
    "BatchOutOfRange": "job {job} accepts batch sizes {min}\u2013{max}; the resize asks for {batch_size}",
    "EmptyEntry": "the resize names node {node} with no GPU; leave it out",
    # ``over`` is the OverLimit: its text is the problem's.
    "OverTenantLimit": "{over}",
}

#: BatchOutOfRange's text for a job without a batch size (its range is 0–0).
_NO_BATCH = "job {job} has no batch size the host sets; the resize asks for {batch_size}"


class Problem(Exception):
    """Why an action is refused: ``kind`` names the case (as the Rust ``Problem`` variant),
    ``fields`` carries what its text names; ``str()`` is the host's text."""

    def __init__(self, kind: str, **fields: object) -> None:
        text = _TEXTS[kind]
        if kind == "BatchOutOfRange" and fields["min"] == fields["max"] == 0:
            text = _NO_BATCH
        # A list as Rust's `{:?}` writes it: `[1, 2, 4]`.
        shown = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
        super().__init__(text.format(**shown))
        self.kind = kind
        self.fields = fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Problem) and (self.kind, self.fields) == (other.kind, other.fields)

    def __hash__(self) -> int:
        return hash((self.kind, str(self)))

    def __repr__(self) -> str:
        return f"Problem({self.kind!r}, {str(self)!r})"


class Oversized(Exception):
    """Why a whole decision is refused: it holds more than any decision for its world could
    need. ``str()`` of it is the host's words."""


class Room(NamedTuple):
    """How much a decision may hold for the world it was made for (:func:`size`)."""

    #: Live jobs, running and queued.
    jobs: int
    #: Queued jobs: no decision places more.
    queued: int
    #: Nodes: no placement names more node entries.
    nodes: int
    #: The most GPUs any node has: no node entry names more.
    gpus_per_node: int


def size(kinds: Sequence[object], room: Room) -> None:
    """Raise :class:`Oversized` for a decision (its actions' kinds) larger than any decision
    for a world of ``room`` could need: more actions than :func:`max_actions`, more placements
    than queued jobs, a placement or resize naming more node entries than there are nodes, or a
    node entry more GPUs than any node has. Counts lengths only, and stops at the first
    excess."""
    actions, limit = len(kinds), max_actions(room.jobs)
    if actions > limit:
        raise Oversized(f"decision has {actions} actions; at most {limit} are accepted for {room.jobs} jobs")
    placements = 0
    for i, kind in enumerate(kinds):
        if isinstance(kind, d.Place):
            placements += 1
            if placements > room.queued:
                raise Oversized(f"decision places {placements} jobs; {room.queued} are queued")
        elif not isinstance(kind, d.Resize):
            continue
        if len(kind.nodes) > room.nodes:
            raise Oversized(f"action {i} places on {len(kind.nodes)} node entries; the cluster has {room.nodes} nodes")
        for _, gpus in kind.nodes:
            if len(gpus) > room.gpus_per_node:
                raise Oversized(
                    f"action {i} names {len(gpus)} GPUs of one node; no node has more than {room.gpus_per_node}"
                )


class NodeCap(NamedTuple):
    """A node's capacity, as the checks need it."""

    name: str
    cpu_millicores: int
    memory_bytes: int
    #: How many GPUs it has.
    gpus: int
    #: Whether it cannot take work now (NotReady, cordoned): nothing is placed, moved or
    #: resized onto it.
    down: bool = False


class JobNow(NamedTuple):
    """A live job, as the checks need it."""

    #: The GPUs it asks for.
    gpus: int
    #: Into how many pieces it may be split, as declared (0 reads as 1).
    replicas: int
    #: Where it runs (its first node); None while it waits in the queue.
    node: int | None
    memory_used_bytes: int
    #: The GPU counts it can run on, ascending (a rigid job: its ``gpus`` alone).
    gpu_counts: tuple[int, ...] = ()
    #: The global batch sizes it accepts, (min, max); (0, 0): none to set.
    batch_sizes: tuple[int, int] = (0, 0)
    #: Its tenant's index in the checker's :class:`Ledger`; None: no tenant limits it.
    tenant: int | None = None


class World(Protocol):
    """What the checks read of the world a decision was made for."""

    def node(self, node: int) -> NodeCap | None: ...
    def node_count(self) -> int: ...
    def job(self, job: int) -> JobNow | None: ...
    def gpus_of(self, job: int) -> list[tuple[int, int]]: ...
    def memory_used_on(self, node: int) -> int: ...


class Checker:
    """Checks a decision's actions in order, against the world as the accepted ones leave
    it."""

    __slots__ = ("book", "ledger", "_moved")

    def __init__(self, book: GpuBook) -> None:
        """Start on a world whose GPUs are held as ``book`` says (every running job's), with no
        tenant limits."""
        #: The GPUs as the accepted actions so far leave them.
        self.book = book
        #: What each tenant holds as the accepted actions so far leave it.
        self.ledger = Ledger()
        self._moved: set[int] = set()

    def with_tenants(self, ledger: Ledger) -> Checker:
        """Hold tenants to their limits, from what ``ledger`` says they hold now (every running
        job's GPUs, counted to its tenant)."""
        self.ledger = ledger
        return self

    def check(self, world: World, job: int, kind: d.ActionKind) -> None:
        """Check ``kind`` on ``job`` (raises :class:`Problem`); when it passes, the world moves
        on as it says (a placement takes its GPUs, a preemption or a stop frees them, a resize
        does both)."""
        self._problem(world, job, kind)
        if not isinstance(kind, (d.Place, d.Preempt, d.Stop, d.Resize)):
            return
        now = world.job(job)
        tenant = None if now is None else now.tenant
        freed = [] if isinstance(kind, d.Place) else world.gpus_of(job)
        taken = kind.nodes if isinstance(kind, (d.Place, d.Resize)) else ()
        for node, index in freed:
            self.book.release(node, index, job)
        for node, gpus in taken:
            for index in gpus:
                self.book.hold(node, index, job)
        if tenant is not None:
            self.ledger.release(tenant, len(freed))
            self.ledger.hold(tenant, sum(len(gpus) for _, gpus in taken))
        self._moved.add(job)

    def _tenant_room(self, world: World, job: int, now: JobNow, nodes: Sequence[tuple[int, Sequence[int]]]) -> None:
        """Why ``job``'s tenant may not go from the GPUs it holds to those ``nodes`` name."""
        if now.tenant is None:
            return
        taken = sum(len(gpus) for _, gpus in nodes)
        held = len(world.gpus_of(job)) if now.node is not None else 0
        try:
            self.ledger.check(now.tenant, max(taken - held, 0))
        except OverLimit as over:
            raise Problem("OverTenantLimit", over=over) from None

    def _problem(self, world: World, job: int, kind: d.ActionKind) -> None:
        now = world.job(job)
        if now is None:
            raise Problem("NoSuchJob", job=job)
        if job in self._moved:
            raise Problem("AlreadyMoved", job=job)
        on = now.node
        if on is None:
            if isinstance(kind, d.Place):
                self._placement(world, job, now, kind.nodes, kind.share)
                self._tenant_room(world, job, now, kind.nodes)
            elif not isinstance(kind, d.Stop):
                raise Problem("Queued", job=job)
            return
        nodes = world.node_count()
        node = world.node(on)
        if node is None:
            raise Problem("NoSuchNode", node=on, nodes=nodes)
        if isinstance(kind, d.SetCpu) and kind.limit is not None:
            if kind.limit < MIN_CPU_MILLICORES:
                raise Problem("CpuBelowMinimum", millicores=kind.limit)
            if kind.limit > node.cpu_millicores:
                raise Problem("CpuAboveNode", millicores=kind.limit, node=node.name, has=node.cpu_millicores)
        elif isinstance(kind, d.SetMemory) and kind.limit is not None:
            if kind.limit < MIN_MEMORY_BYTES:
                raise Problem("MemoryBelowMinimum", bytes=kind.limit)
            if kind.limit > node.memory_bytes:
                raise Problem("MemoryAboveNode", bytes=kind.limit, node=node.name, has=node.memory_bytes)
        elif isinstance(kind, d.Migrate):
            self._migration(world, job, now, on, kind.node, nodes)
        elif isinstance(kind, d.SetGpuShare):
            if kind.gpu >= node.gpus:
                raise Problem("NoSuchGpu", node=node.name, gpu=kind.gpu, count=node.gpus)
            if kind.percent == 0 or kind.percent > 100:
                raise Problem("ShareOutOfRange", percent=kind.percent)
        elif isinstance(kind, d.Place):
            raise Problem("PlaceRunning", job=job, node=node.name)
        elif isinstance(kind, d.Resize):
            if kind.batch_size is not None:
                low, high = now.batch_sizes
                if kind.batch_size < low or kind.batch_size > high or high == 0:
                    raise Problem("BatchOutOfRange", job=job, batch_size=kind.batch_size, min=low, max=high)
            self._elastic_entries(world, job, now, kind.nodes, kind.share)
            self._tenant_room(world, job, now, kind.nodes)

    def _migration(self, world: World, job: int, now: JobNow, on: int, to: int, nodes: int) -> None:
        dest = world.node(to)
        if dest is None:
            raise Problem("NoSuchNode", node=to, nodes=nodes)
        if dest.down:
            raise Problem("NodeDown", node=dest.name)
        if to == on:
            raise Problem("AlreadyOn", job=job, node=dest.name)
        held = world.gpus_of(job)
        if any(n != on for n, _ in held):
            raise Problem("SpansNodes", job=job)
        free = self.book.free_count(to)
        if free < len(held):
            raise Problem("TooFewFreeGpus", node=dest.name, free=free, job=job, holds=len(held))
        used = world.memory_used_on(to)
        if used + now.memory_used_bytes > dest.memory_bytes:
            raise Problem(
                "NodeFull", node=dest.name, used=used, capacity=dest.memory_bytes, needs=now.memory_used_bytes
            )

    def _placement(
        self, world: World, job: int, now: JobNow, nodes: Sequence[tuple[int, Sequence[int]]], share: bool
    ) -> None:
        pieces = max(now.replicas, 1)
        if not nodes:
            raise Problem("NoNodeNamed", job=job)
        if len(now.gpu_counts) > 1:
            # An elastic job starts on any of its counts, spread as a resize spreads it.
            self._elastic_entries(world, job, now, nodes, share)
            return
        if len(nodes) > pieces:
            raise Problem("TooManyNodes", job=job, pieces=pieces, replicas=now.replicas, named=len(nodes))
        self._entries(world, job, nodes, share, gpus_per_piece(now.gpus, now.replicas))
        given = sum(len(gpus) for _, gpus in nodes)
        if given != now.gpus:
            raise Problem("WrongGpuCount", job=job, asks=now.gpus, given=given)

    def _elastic_entries(
        self, world: World, job: int, now: JobNow, nodes: Sequence[tuple[int, Sequence[int]]], share: bool
    ) -> None:
        """Why ``job`` cannot run on the GPUs ``nodes`` name as an elastic job starts or is
        resized: a total among its counts, each node named with at least one GPU (and
        :meth:`_entries`)."""
        given = sum(len(gpus) for _, gpus in nodes)
        if given not in now.gpu_counts:
            raise Problem("CountNotAllowed", job=job, given=given, counts=tuple(now.gpu_counts))
        self._entries(world, job, nodes, share, None)

    def _entries(
        self,
        world: World,
        job: int,
        nodes: Sequence[tuple[int, Sequence[int]]],
        share: bool,
        per_piece: int | None,
    ) -> None:
        """Why ``job`` cannot have the GPUs ``nodes`` name: each node exists, can take work
        and is named once, each GPU exists, is named once and is free (or ``share``, or held by
        ``job`` itself, which a resize gives up). A placement's spread entries hold whole
        replicas of ``per_piece`` GPUs; a resize's (``per_piece`` None) at least one GPU
        each."""
        if not nodes:
            raise Problem("NoNodeNamed", job=job)
        for k, (n, gpus) in enumerate(nodes):
            node = world.node(n)
            if node is None:
                raise Problem("NoSuchNode", node=n, nodes=world.node_count())
            if node.down:
                raise Problem("NodeDown", node=node.name)
            if any(earlier == n for earlier, _ in nodes[:k]):
                raise Problem("NodeTwice", node=node.name)
            if len(gpus) > node.gpus:
                raise Problem("TooManyGpus", node=node.name, count=node.gpus, asked=len(gpus))
            if len(nodes) > 1:
                if per_piece is not None and (not gpus or len(gpus) % per_piece != 0):
                    raise Problem("NotWholeReplicas", per_piece=per_piece, node=node.name, got=len(gpus))
                if per_piece is None and not gpus:
                    raise Problem("EmptyEntry", node=node.name)
            for g, index in enumerate(gpus):
                if index >= node.gpus or not self.book.exists(n, index):
                    raise Problem("NoSuchGpu", node=node.name, gpu=index, count=node.gpus)
                if index in gpus[:g]:
                    raise Problem("GpuTwice", gpu=index, node=node.name)
                other = next((h for h in self.book.holders(n, index) if h != job), None)
                if other is not None and not share:
                    raise Problem("GpuHeld", gpu=index, node=node.name, holder=other)


class _Seen:
    """A snapshot, as the rules read it."""

    __slots__ = ("_s",)

    def __init__(self, snapshot: Snapshot) -> None:
        self._s = snapshot

    def node(self, node: int) -> NodeCap | None:
        n = self._s.node(node)
        return None if n is None else NodeCap(n.name, n.cpu, n.memory, len(n.gpus), not n.takes_work)

    def node_count(self) -> int:
        return len(self._s.nodes())

    def job(self, job: int) -> JobNow | None:
        j = self._s.job(job)
        if j is None:
            return None
        # The declared replicas, 0 included: the host's texts name the declared number.
        replicas = j._entry.spec.replicas
        scaling = j.scaling
        return JobNow(
            j.gpus_asked,
            replicas,
            None if j.is_queued else j.node,
            j.memory_use,
            tuple(scaling.gpu_counts),
            (scaling.batch_size_min, scaling.batch_size_max),
            self._s.tenant_index(j.tenant),
        )

    def gpus_of(self, job: int) -> list[tuple[int, int]]:
        j = self._s.job(job)
        return [] if j is None else [(g.node, g.index) for g in j.gpus]

    def memory_used_on(self, node: int) -> int:
        return sum(j.memory_use for j in self._s.jobs_on(node))


def _book(snapshot: Snapshot) -> GpuBook:
    """Who holds each GPU: every running job its GPUs, in handle order."""
    book = GpuBook(len(n.gpus) for n in snapshot.nodes())
    for job in snapshot.jobs():
        for g in job.gpus:
            book.hold(g.node, g.index, job.id)
    return book


def verdicts(snapshot: Snapshot, decision: d.Decision) -> list[Problem | None]:
    """What the host's validation makes of each action of ``decision``, made on
    ``snapshot``, in order: None when it is accepted, else the :class:`Problem` (``str()`` of
    it is the host's words); a refused action changes nothing for the actions after it. Raises
    :class:`Oversized` when the decision is refused whole for its size."""
    nodes = snapshot.nodes()
    room = Room(
        snapshot.job_count + snapshot.queue_len,
        snapshot.queue_len,
        len(nodes),
        max((len(n.gpus) for n in nodes), default=0),
    )
    size([a.kind for a in decision.actions], room)
    world = _Seen(snapshot)
    checker = Checker(_book(snapshot)).with_tenants(snapshot.ledger())
    out: list[Problem | None] = []
    for action in decision.actions:
        try:
            checker.check(world, action.job, action.kind)
            out.append(None)
        except Problem as problem:
            out.append(problem)
    return out


def check(snapshot: Snapshot, decision: d.Decision) -> str | None:
    """Whether the host would accept every action of ``decision``, made on ``snapshot``: None
    when it would, else the first problem as ``action N: `` and the host's words (the host's
    words alone for a decision too large). Policy tests run it on every decision."""
    try:
        found = verdicts(snapshot, decision)
    except Oversized as e:
        return str(e)
    for i, problem in enumerate(found):
        if problem is not None:
            return f"action {i}: {problem}"
    return None
