"""Read the host's telemetry recordings (``[record] telemetry = …``, JSON lines) natively, to
run a Python policy over what a real run saw, and write decisions in the same JSON shape the
host records (serde's), to diff them against a Rust policy's.

A recording holds one line per tick with the *world's* delta on that tick and the recorded
decision (null when the policy was not asked). :func:`policy_calls` turns it into the
snapshots a policy instance was sent: the deltas of the ticks it was not asked on are folded
into the next one it was.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from . import decision as d
from .enums import Direction, JobKind, WaitReason
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

_DIRECTIONS = {"HigherIsBetter": Direction.HIGHER_IS_BETTER, "LowerIsBetter": Direction.LOWER_IS_BETTER}
_KINDS = {"Training": JobKind.TRAINING, "Inference": JobKind.INFERENCE}
_REASONS = {"NeverStarted": WaitReason.NEVER_STARTED, "Preempted": WaitReason.PREEMPTED}


def _spec(j: dict[str, Any]) -> JobSpec:
    tiers = j.get("tiers")
    scaling = j.get("scaling") or {}
    return JobSpec(
        handle=j["handle"],
        name=j["name"],
        model=j["model"],
        kind=_KINDS[j["kind"]],
        metrics=[MetricSpec(m["name"], _DIRECTIONS[m["direction"]]) for m in j["metrics"]],
        tiers=None if tiers is None else Tiers(tiers["deliverable"], tiers.get("final_", tiers.get("final"))),
        qoe_target=j.get("qoe_target"),
        max_epochs=j.get("max_epochs"),
        labels=[(k, v) for k, v in j.get("labels", [])],
        arrival_ms=j["arrival_ms"],
        gpus=j.get("gpus", 0),
        replicas=j.get("replicas", 1),
        # A recording made under contract 0.2.0 has none: a rigid job at its GPU count.
        scaling=Scaling(
            list(scaling.get("gpu_counts", [j.get("gpus", 0)])),
            scaling.get("batch_size_min", 0),
            scaling.get("batch_size_max", 0),
        ),
        # A recording made before tenants names none: the default tenant's.
        tenant=j.get("tenant") or "default",
    )


def _tenant(t: dict[str, Any]) -> Tenant:
    return Tenant(
        t["name"], t.get("weight", 1.0), t.get("quota_gpus"), t.get("borrowing_limit_gpus"), t.get("cohort", "")
    )


def _floats(values: Iterable[Any]) -> list[float]:
    # serde_json writes NaN as null.
    return [math.nan if v is None else float(v) for v in values]


def snapshot_from_json(s: dict[str, Any]) -> Snapshot:
    """A snapshot as serde_json writes the contract's ``Snapshot``."""
    nodes = s.get("nodes")
    # None (or absent, before tenants): the list did not change.
    tenants = s.get("tenants")
    j, q, p, g = s["jobs"], s["queue"], s["progress"], s["gpus"]
    return Snapshot(
        time_ms=s["time_ms"],
        interval_ms=s["interval_ms"],
        resync=s["resync"],
        nodes=None
        if nodes is None
        else [
            Node(n["name"], n["cpu_millicores"], n["memory_bytes"], list(n["gpu_memory_bytes"]), n.get("gpu_type", ""))
            for n in nodes
        ],
        nodes_down=list(s.get("nodes_down", [])),
        tenants=None if tenants is None else [_tenant(t) for t in tenants],
        gpus=GpuStates(_floats(g["utilisation_percent"]), list(g["memory_used_bytes"])),
        added=[_spec(a) for a in s["added"]],
        removed=list(s["removed"]),
        jobs=JobStates(
            handle=j["handle"],
            node=j["node"],
            cpu_limit_millicores=j["cpu_limit_millicores"],
            memory_limit_bytes=j["memory_limit_bytes"],
            cpu_used_millicores=j["cpu_used_millicores"],
            memory_used_bytes=j["memory_used_bytes"],
            gpu_count=j["gpu_count"],
            gpu_node=j["gpu_node"],
            gpu_index=j["gpu_index"],
            gpu_share_percent=j["gpu_share_percent"],
            gpu_used_percent=_floats(j["gpu_used_percent"]),
            run_ms=j["run_ms"],
            gpu_ms=j["gpu_ms"],
            batch_size=j.get("batch_size", [0] * len(j["handle"])),
        ),
        queue=QueueStates(q["handle"], [_REASONS[r] for r in q["reason"]], q["since_ms"], q["run_ms"], q["gpu_ms"]),
        progress=ProgressRecords(p["job"], p["time_ms"], p["epoch"], list(p["value_count"]), _floats(p["values"])),
    )


def _merge(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """Two consecutive world deltas as one: the later's numbers, both ticks' arrivals,
    departures and records (a job that came and went in between is in neither list)."""
    came = {a["handle"] for a in earlier["added"]}
    went = set(later["removed"])
    merged = dict(later)
    merged["added"] = [a for a in earlier["added"] if a["handle"] not in went] + later["added"]
    merged["removed"] = [h for h in earlier["removed"]] + [h for h in later["removed"] if h not in came]
    merged["resync"] = earlier["resync"] or later["resync"]
    merged["interval_ms"] = earlier["interval_ms"] + later["interval_ms"]
    if later.get("nodes") is None:
        merged["nodes"] = earlier.get("nodes")
    if later.get("tenants") is None:
        merged["tenants"] = earlier.get("tenants")
    progress = {k: list(earlier["progress"][k]) + list(later["progress"][k]) for k in later["progress"]}
    merged["progress"] = progress
    return merged


def policy_calls(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any], dict[str, Any] | None]]:
    """From a recording's lines: (tick, snapshot JSON, recorded decision JSON) for each tick
    the recorded policy was asked on, its snapshot folded over the ticks it was not."""
    pending: dict[str, Any] | None = None
    for line in lines:
        if not line.strip():
            continue
        rec = json.loads(line)
        if "snapshot" not in rec:
            continue  # the header
        s = rec["snapshot"]
        pending = s if pending is None else _merge(pending, s)
        if rec.get("decision") is not None:
            yield rec["tick"], pending, rec["decision"]
            pending = None


def kind_to_json(kind: d.ActionKind) -> Any:
    """An action kind as serde_json writes the contract's ``ActionKind``."""
    if isinstance(kind, (d.SetCpu, d.SetMemory)):
        return {type(kind).__name__: kind.limit}
    if isinstance(kind, d.Migrate):
        return {"Migrate": kind.node}
    if isinstance(kind, d.SetGpuShare):
        return {"SetGpuShare": {"gpu": kind.gpu, "percent": kind.percent}}
    if isinstance(kind, d.Place):
        nodes = [{"node": n, "gpus": list(g)} for n, g in kind.nodes]
        return {"Place": {"nodes": nodes, "share": kind.share}}
    if isinstance(kind, d.Resize):
        nodes = [{"node": n, "gpus": list(g)} for n, g in kind.nodes]
        return {"Resize": {"placement": {"nodes": nodes, "share": kind.share}, "batch_size": kind.batch_size}}
    return type(kind).__name__


def decision_to_json(decision: d.Decision) -> dict[str, Any]:
    """A decision as serde_json writes the contract's ``Decision``."""
    actions = [{"job": a.job, "kind": kind_to_json(a.kind), "reason": a.reason} for a in decision.actions]
    pending = [{"job": job, "reason": reason} for job, reason in decision.pending_reasons]
    return {"actions": actions, "next_call_ms": decision.next_call_ms, "pending": pending}
