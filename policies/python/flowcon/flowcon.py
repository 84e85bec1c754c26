"""FlowCon: elastic CPU limits on each node, by growth efficiency. A line-by-line port of the
Rust policy (``policies/flowcon/src/lib.rs``): the same decisions, reasons included, bit for
bit, and the same saved state, so a hot swap between the two keeps it.

Every Δ the policy measures how much each training job's normalised metric moved (the
windowed mean over the last Δ against the Δ before it) per second, per unit of the node's
CPU the job used: its growth efficiency G. A job below α once is *watching* (it keeps its
limit), twice in a row *completing*; G ≥ α makes it *growing* again. Growing jobs get
min(G/ΣG, 1) of the node, completing ones max(G/ΣG, 1/(n+1)) so near-done jobs still
finish. When every job of a node is completing, its limits are lifted and the interval
doubles (Δ, 2Δ, 4Δ …) until a job starts or ends. A job is never limited before it has 2Δ
of history. Limits are fractional cores. P is measured per minute (see the Rust docs).

Reads: each job's progress records (main metric, either direction), CPU use and node.
Inference services are left alone.

Config (kebab-case keys, all optional):
- ``interval-s`` (30): Δ, seconds between rounds;
- ``alpha`` (0.03): the growth-efficiency threshold, in normalised metric per minute per
  node-fraction of CPU;
- ``max-backoff`` (16): the interval grows to at most this many Δ;
- ``min-limit-millicores`` (10): no limit is set below this.

Paper: W. Zheng, M. Tynes, H. Gorelick, Y. Mao, L. Cheng, Y. Hou, "FlowCon: Elastic Flow
Configuration for Containerized Deep Learning Applications", ICPP 2019,
doi 10.1145/3337821.3337868.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from wasmsched import (
    U32,
    U64,
    Action,
    Decision,
    InvalidConfig,
    InvalidState,
    Job,
    JobKind,
    Node,
    Policy,
    Rounds,
    Snapshot,
    decode_state,
    encode_state,
    log,
)
from wasmsched.numeric import U32_MAX, as_u64, fmax, fmin, fmt_fixed, round_half_away, sum_left
from wasmsched.units import fmt_seconds


@dataclass
class Config:
    """FlowCon's constants."""

    #: Δ: seconds between rounds.
    interval_s: float = 30.0
    #: α: growth efficiency (normalised metric per minute per node-fraction) below which a
    #: job is slow.
    alpha: float = 0.03
    #: The interval backs off to at most this many Δ.
    max_backoff: U32 = 16
    #: The smallest limit set, in millicores.
    min_limit_millicores: U64 = 10


class Flag(Enum):
    """Where a job stands; the values are the Rust enum's serde names."""

    #: Growing fast enough for its CPU.
    GROWING = "Growing"
    #: Slow for one round: keeps its limit.
    WATCHING = "Watching"
    #: Slow for two rounds or more: near done.
    COMPLETING = "Completing"


@dataclass
class State:
    """What survives a hot swap, in the JSON shape serde gives the Rust ``State``."""

    #: Per job handle.
    flags: dict[int, Flag] = field(default_factory=dict)
    #: When the last round ran.
    rounds: Rounds = field(default_factory=Rounds)
    #: The interval is ``backoff`` × Δ.
    backoff: int = 0
    #: The jobs seen at the last round, to notice one starting or ending.
    jobs: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """As serde_json writes it: flags by handle in handle order, as strings."""
        return {
            "flags": {str(h): self.flags[h].value for h in sorted(self.flags)},
            "rounds": self.rounds.to_json(),
            "backoff": self.backoff,
            "jobs": list(self.jobs),
        }

    @classmethod
    def from_json(cls, value: Any) -> State:
        """As serde reads the Rust ``State``: every field required, unknown ones ignored.
        Raises ValueError."""
        if not isinstance(value, dict):
            raise ValueError("invalid type, expected struct State")
        for key in ("flags", "rounds", "backoff", "jobs"):
            if key not in value:
                raise ValueError(f"missing field `{key}`")
        flags_in = value["flags"]
        if not isinstance(flags_in, dict):
            raise ValueError("invalid type for `flags`, expected a map")
        flags = {}
        for k, v in flags_in.items():
            if not (k.isdigit() and int(k) <= U32_MAX):
                raise ValueError(f"invalid job handle `{k}` in `flags`")
            try:
                flags[int(k)] = Flag(v)
            except ValueError:
                raise ValueError(f"unknown variant `{v}`, expected one of `Growing`, `Watching`, `Completing`") from None
        return cls(flags, Rounds.from_json(value["rounds"]), _u32(value["backoff"]), [_u32(h) for h in _list(value["jobs"])])


def _u32(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= U32_MAX:
        raise ValueError(f"invalid value `{v}`, expected u32")
    return v


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise ValueError("invalid type for `jobs`, expected a sequence")
    return v


class FlowCon(Policy):
    """The FlowCon policy."""

    Config = Config

    def __init__(self, config: Config | None = None) -> None:
        self.config = config if config is not None else Config()
        self.state = State(backoff=1)

    @classmethod
    def new(cls, config: Config) -> FlowCon:
        c = config
        valid = math.isfinite(c.interval_s) and c.interval_s > 0.0 and math.isfinite(c.alpha) and c.alpha >= 0.0
        if not valid or c.max_backoff == 0:
            raise InvalidConfig("interval-s must be positive, alpha zero or more, max-backoff at least 1")
        return cls(c)

    def flag(self, job: int) -> Flag | None:
        """A job's flag, for tests and logs."""
        return self.state.flags.get(job)

    def interval(self) -> float:
        """The current interval between rounds, seconds."""
        return self.config.interval_s * float(max(self.state.backoff, 1))

    def _round_on(self, s: Snapshot, node: Node, d: Decision) -> bool:
        """One node's round: flags updated, limits decided. True when every job there is
        completing (a job too young to judge is not)."""
        now = s.time
        delta = self.config.interval_s
        jobs = [j for j in s.jobs_on(node.id) if j.kind is JobKind.TRAINING]
        if not jobs:
            return False
        n = float(len(jobs))
        # Jobs with 2Δ of history are judged; younger ones run unlimited.
        judged: list[tuple[Job, float]] = []
        flags = self.state.flags
        for job in jobs:
            if now - job.first_seen < 2.0 * delta:
                if job.cpu_limit is not None:
                    d.push(Action.lift_cpu(job.id).because("flowcon: new job, unlimited for its first 2Δ"))
                continue
            g = job.growth_efficiency(now, delta, node.cpu)
            flag = flags.setdefault(job.id, Flag.GROWING)
            if not g < self.config.alpha:
                flag = Flag.GROWING
            elif flag is Flag.GROWING:
                flag = Flag.WATCHING
            else:
                flag = Flag.COMPLETING
            flags[job.id] = flag
            judged.append((job, g))
        if not judged:
            return False
        if len(judged) == len(jobs) and all(flags[job.id] is Flag.COMPLETING for job, _ in judged):
            for job, _ in judged:
                if job.cpu_limit is not None:
                    d.push(Action.lift_cpu(job.id).because("flowcon: every job on the node is completing"))
            return True
        total = sum_left(g for _, g in judged)
        for job, g in judged:
            share = g / total if total > 0.0 else 1.0 / float(len(judged))
            flag = flags[job.id]
            if flag is Flag.WATCHING:
                continue
            if flag is Flag.GROWING:
                fraction, why = fmin(share, 1.0), "growing"
            else:
                fraction, why = fmax(share, 1.0 / (n + 1.0)), "completing"
            limit = max(as_u64(round_half_away(fraction * float(node.cpu))), self.config.min_limit_millicores)
            if job.cpu_limit != limit:
                percent = fmt_fixed(100.0 * fraction, 0)
                d.push(
                    Action.set_cpu(job.id, limit).because(
                        f"flowcon: {why}, G = {fmt_fixed(g, 4)}, {percent} % of the node"
                    )
                )
        return False

    def decide(self, s: Snapshot) -> Decision:
        now = s.time
        d = Decision()
        jobs = [j.id for j in s.jobs()]
        changed = jobs != self.state.jobs
        if changed:
            # A job started or ended: back to Δ, and forget the jobs that left.
            self.state.backoff = 1
            live = set(jobs)
            self.state.flags = {h: f for h, f in self.state.flags.items() if h in live}
            self.state.jobs = jobs
        if changed:
            self.state.rounds.start(now)
        elif not self.state.rounds.due(now, self.interval(), d):
            return d
        busy_nodes = 0
        all_completing = 0
        for node in s.nodes():
            if next(s.jobs_on(node.id), None) is None:
                continue
            busy_nodes += 1
            all_completing += int(self._round_on(s, node, d))
        if busy_nodes > 0 and all_completing == busy_nodes:
            # u32 arithmetic, wrapping as a Rust release build does.
            self.state.backoff = min((self.state.backoff * 2) & U32_MAX, self.config.max_backoff)
            log.info(f"flowcon: every job is completing; next round in {fmt_seconds(self.interval())}")
        else:
            self.state.backoff = 1
        d.call_again_in(self.interval())
        return d

    def save_state(self) -> bytes:
        return encode_state(self.state.to_json())

    def restore_state(self, saved: bytes) -> None:
        try:
            self.state = State.from_json(decode_state(saved))
        except ValueError as e:
            raise InvalidState(str(e)) from None
