"""Reading the host's telemetry recordings natively, and writing decisions as serde does."""

from __future__ import annotations

import json

from wasmsched import Action, Decision, Direction, Policy, Runner, WaitReason
from wasmsched.recording import decision_to_json, policy_calls, snapshot_from_json


def world(tick: int, added=(), removed=(), progress=None, nodes=None, resync=False) -> dict:
    jobs = [0, 1] if tick < 3 else [1, 2]
    return {
        "time_ms": 30000 * tick, "interval_ms": 0 if resync else 30000, "resync": resync, "nodes": nodes,
        "gpus": {"utilisation_percent": [], "memory_used_bytes": []},
        "added": [
            {"handle": h, "name": f"j{h}", "model": "m", "kind": "Training",
             "metrics": [{"name": "loss", "direction": "LowerIsBetter"}], "tiers": {"deliverable": 1.0, "final_": 0.5},
             "qoe_target": None, "max_epochs": None, "labels": [["a", "b"]], "arrival_ms": 0, "gpus": 0, "replicas": 1}
            for h in added
        ],
        "removed": list(removed),
        "jobs": {"handle": jobs, "node": [0, 0], "cpu_limit_millicores": [0, 0], "memory_limit_bytes": [0, 0],
                 "cpu_used_millicores": [0, 0], "memory_used_bytes": [0, 0], "gpu_count": [0, 0], "gpu_node": [],
                 "gpu_index": [], "gpu_share_percent": [0, 0], "gpu_used_percent": [0.0, 0.0], "run_ms": [0, 0],
                 "gpu_ms": [0, 0]},
        "queue": {"handle": [3], "reason": ["Preempted"], "since_ms": [0], "run_ms": [0], "gpu_ms": [0]},
        "progress": progress or {"job": [], "time_ms": [], "epoch": [], "value_count": [], "values": []},
    }


def test_ticks_the_policy_was_not_asked_on_fold_into_the_next():
    node = [{"name": "n0", "cpu_millicores": 8000, "memory_bytes": 1, "gpu_memory_bytes": []}]
    record = {"job": [1], "time_ms": [45000], "epoch": [1], "value_count": [1], "values": [None]}
    decided = {"policy": "p", "sha256": "", "actions": [], "fallback": False}
    lines = [
        json.dumps({"format": "wasmsched-telemetry/1", "tick_ms": 30000}),
        json.dumps({"tick": 1, "snapshot": world(1, added=[0, 1, 3], nodes=node, resync=True), "decision": decided}),
        json.dumps({"tick": 2, "snapshot": world(2, added=[2], progress=record), "decision": None}),
        json.dumps({"tick": 3, "snapshot": world(3, removed=[0, 2], added=[4]), "decision": decided}),
    ]
    calls = list(policy_calls(lines))
    assert [t for t, _, _ in calls] == [1, 3]
    merged = calls[1][1]
    assert [a["handle"] for a in merged["added"]] == [4], "job 2 came and went between calls"
    assert merged["removed"] == [0] and merged["interval_ms"] == 60000
    assert merged["progress"]["job"] == [1] and merged["progress"]["values"] == [None]
    assert merged["nodes"] is None, "the nodes did not change since the call before"

    s = snapshot_from_json(calls[0][1])
    assert s.added[0].metrics[0].direction is Direction.LOWER_IS_BETTER and s.added[0].tiers.final == 0.5
    assert s.queue.reason == [WaitReason.PREEMPTED]
    r = Runner(Policy())
    r.policy.decide = lambda view: Decision()
    r.decide(s)
    assert [j.id for j in r.view().queue()] == [3]


def test_decisions_are_written_as_serde_writes_the_contracts_decision():
    d = Decision().push(Action.set_cpu(1, 2667).because("x")).push(Action.stop(2)).call_again_in(60.0)
    d.push(Action.place(3, 0, [1])).push(Action.lift_memory(4))
    assert decision_to_json(d) == {
        "actions": [
            {"job": 1, "kind": {"SetCpu": 2667}, "reason": "x"},
            {"job": 2, "kind": "Stop", "reason": ""},
            {"job": 3, "kind": {"Place": {"nodes": [{"node": 0, "gpus": [1]}], "share": False}}, "reason": ""},
            {"job": 4, "kind": {"SetMemory": None}, "reason": ""},
        ],
        "next_call_ms": 60000,
        "pending": [],
    }
