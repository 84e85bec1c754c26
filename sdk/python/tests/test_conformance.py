"""The conformance vectors the host writes with its own encoder and validator
(``wit/conformance/``, see its README): the tables decode every delta into the table the
host's world holds and refuse every malformed one, and :mod:`wasmsched.rules` gives every
action of every decision the host's outcome, word for word."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from wasmsched import Action, Decision, Direction, Failed, JobKind, Policy, Resize, Runner, WaitReason, rules
from wasmsched.recording import snapshot_from_json

VECTORS = Path(__file__).resolve().parents[3] / "wit" / "conformance"


def vectors(file: str) -> list[dict[str, Any]]:
    return json.loads((VECTORS / file).read_text(encoding="utf-8"))["cases"]


SNAPSHOTS = vectors("snapshots.json")
CHECKS = vectors("checks.json")


class Inspect(Policy):
    """A policy that does nothing, to look at what the runner keeps."""

    def decide(self, snapshot: Any) -> Decision:
        return Decision()


def ms(seconds: float) -> int:
    return round(seconds * 1000)


def or_none(v: float) -> float | None:
    return None if math.isnan(v) else v


DIRECTIONS = {Direction.HIGHER_IS_BETTER: "higher-is-better", Direction.LOWER_IS_BETTER: "lower-is-better"}
KINDS = {JobKind.TRAINING: "training", JobKind.INFERENCE: "inference"}
REASONS = {WaitReason.NEVER_STARTED: "never-started", WaitReason.PREEMPTED: "preempted"}


def table(view: Any) -> dict[str, Any]:
    """The table as the policy's view reads it, in the vectors' neutral form."""
    nodes = [
        {
            "name": n.name,
            "cpu_millicores": n.cpu,
            "memory_bytes": n.memory,
            "gpus": [
                {"memory_bytes": g.memory_total, "utilisation_percent": g.utilisation_percent,
                 "memory_used_bytes": g.memory_used}
                for g in n.gpus
            ],
        }
        for n in view.nodes()
    ]
    jobs = []
    for j in sorted([*view.jobs(), *view.queue()], key=lambda j: j.id):
        running = None if j.is_queued else {
            "node": j.node,
            "gpus": [[g.node, g.index] for g in j.gpus],
            "cpu_limit_millicores": j.cpu_limit,
            "memory_limit_bytes": j.memory_limit,
            "cpu_used_millicores": j.cpu_use,
            "memory_used_bytes": j.memory_use,
            "gpu_share_percent": j.gpu_share,
            "gpu_used_percent": j.gpu_use_percent,
            "run_ms": ms(j.run_time),
            "gpu_ms": ms(j.attained_service),
        }
        queued = None if not j.is_queued else {
            "reason": REASONS[j.wait_reason],
            "since_ms": ms(view.time) - ms(j.wait(view.time)),
            "run_ms": ms(j.run_time),
            "gpu_ms": ms(j.attained_service),
        }
        last = j.latest
        jobs.append({
            "handle": j.id,
            "name": j.name,
            "model": j.model,
            "kind": KINDS[j.kind],
            "metrics": [{"name": m.name, "direction": DIRECTIONS[m.direction]} for m in j.metrics],
            "gpus_asked": j.gpus_asked,
            "replicas": j.replicas,
            "arrival_ms": ms(j.arrival),
            "running": running,
            "queued": queued,
            "history": {
                "length": len(j.history),
                "new": len(j.new_records),
                "epochs": [r.epoch for r in j.history],
                "last": None if last is None else {
                    "time_ms": ms(last.time), "epoch": last.epoch, "values": [or_none(v) for v in last.values]
                },
            },
        })
    return {"time_ms": ms(view.time), "interval_ms": ms(view.interval), "nodes": nodes, "jobs": jobs}


def test_the_vectors_are_there():
    assert len(SNAPSHOTS) >= 5 and len(CHECKS) >= 10


@pytest.mark.parametrize("case", SNAPSHOTS, ids=[c["name"] for c in SNAPSHOTS])
def test_every_snapshot_vector_decodes_into_the_table_the_host_holds_or_is_refused(case):
    runner = Runner(Inspect())
    for i, tick in enumerate(case["ticks"], start=1):
        delta = snapshot_from_json(tick["delta"])
        expected = tick["expect"].get("table")
        if expected is None:
            with pytest.raises(Failed, match="malformed"):
                runner.decide(delta)
        else:
            runner.decide(delta)
            assert table(runner.view()) == expected, f"tick {i}"


def action(a: dict[str, Any]) -> Action:
    """A neutral action as the SDK's."""
    job, kind = a["job"], a["kind"]
    if kind == "set-cpu":
        return Action.lift_cpu(job) if a["millicores"] is None else Action.set_cpu(job, a["millicores"])
    if kind == "set-memory":
        return Action.lift_memory(job) if a["bytes"] is None else Action.set_memory(job, a["bytes"])
    if kind == "migrate":
        return Action.migrate(job, a["node"])
    if kind == "set-gpu-share":
        return Action.set_gpu_share(job, a["gpu"], a["percent"])
    if kind == "place":
        return Action.place_on(job, [(n["node"], n["gpus"]) for n in a["nodes"]], share=a["share"])
    if kind == "resize":
        nodes = tuple((n["node"], tuple(n["gpus"])) for n in a["nodes"])
        return Action(job, Resize(nodes, a["batch_size"], a["share"]))
    return {"deliver": Action.deliver, "stop": Action.stop, "preempt": Action.preempt}[kind](job)


@pytest.mark.parametrize("case", CHECKS, ids=[c["name"] for c in CHECKS])
def test_every_check_vector_gets_the_hosts_outcome_for_each_action(case):
    runner = Runner(Inspect())
    runner.decide(snapshot_from_json(case["snapshot"]))
    view = runner.view()
    decision = Decision([action(a) for a in case["decision"]])
    if case["refused_whole"] is not None:
        with pytest.raises(rules.Oversized) as refused:
            rules.verdicts(view, decision)
        assert str(refused.value) == case["refused_whole"]
        assert rules.check(view, decision) == case["refused_whole"]
        return
    got = ["accepted" if p is None else str(p) for p in rules.verdicts(view, decision)]
    assert got == case["outcomes"]
    first = next((i for i, o in enumerate(case["outcomes"]) if o != "accepted"), None)
    assert rules.check(view, decision) == (None if first is None else f"action {first}: {case['outcomes'][first]}")
