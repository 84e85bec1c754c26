"""The component glue against the bindings componentize-py generates from wit/0.3.0/policy.wit
(skipped when componentize-py is not installed beside this Python or on PATH)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wasmsched import Action, Decision, Failed, InvalidConfig, Policy, Snapshot, log
from wasmsched.component import export
from wasmsched.testing import TestWorld, job

WIT = Path(__file__).resolve().parents[3] / "wit" / "0.3.0" / "policy.wit"


def _componentize_py() -> str | None:
    beside = Path(sys.executable).parent / "componentize-py"
    return str(beside) if beside.exists() else shutil.which("componentize-py")


@pytest.fixture(scope="module")
def wit(tmp_path_factory):
    """The generated modules: (types, host, Err)."""
    tool = _componentize_py()
    if tool is None or not WIT.exists():
        pytest.skip("componentize-py or wit/0.3.0/policy.wit not found")
    out = tmp_path_factory.mktemp("bindings")
    subprocess.run([tool, "-d", str(WIT), "-w", "policy-plugin", "bindings", str(out)], check=True, capture_output=True)
    sys.path.insert(0, str(out))
    try:
        types = importlib.import_module("wit_world.imports.types")
        host = importlib.import_module("wit_world.imports.host")
        err = importlib.import_module("componentize_py_types").Err
        yield types, host, err
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m.startswith(("wit_world", "componentize_py"))]:
            del sys.modules[name]
        log.set_sink(None)


class Limits(Policy):
    """Caps every job at 1 core, logs, and counts its calls in its state."""

    def __init__(self) -> None:
        self.calls = 0

    def decide(self, s: Snapshot) -> Decision:
        self.calls += 1
        log.info(f"call {self.calls}")
        d = Decision().call_again_in(2.5)
        for j in s.jobs():
            d.push(Action.set_cpu(j.id, 1000).because("capped"))
            d.push(Action.place_on(j.id, [(0, [1])], share=True))
        for j in s.queue():
            d.pending(j.id, f"{j.gpus_asked} GPUs asked")
        if s.job_count == 0:
            raise Failed("no jobs")
        return d

    def save_state(self) -> bytes:
        return str(self.calls).encode()

    def restore_state(self, saved: bytes) -> None:
        self.calls = int(saved)


def generated_snapshot(types, world: TestWorld):
    """The harness's snapshot rebuilt from the generated classes, as the host sends it."""
    s = world.snapshot()
    spec = [
        types.JobSpec(a.handle, a.name, a.model, types.JobKind(a.kind.value), [], None, None, None, [], a.arrival_ms,
                      a.gpus, a.replicas,
                      types.Scaling(a.scaling.gpu_counts, a.scaling.batch_size_min, a.scaling.batch_size_max), a.tenant)
        for a in s.added
    ]
    tenants = None if s.tenants is None else [
        types.Tenant(t.name, t.weight, t.quota_gpus, t.borrowing_limit_gpus, t.cohort) for t in s.tenants
    ]
    nodes = [types.Node(n.name, n.cpu_millicores, n.memory_bytes, n.gpu_memory_bytes, n.gpu_type)
             for n in s.nodes or []]
    j, q = s.jobs, s.queue
    jobs = types.JobStates(j.handle, j.node, j.cpu_limit_millicores, j.memory_limit_bytes, j.cpu_used_millicores,
                           j.memory_used_bytes, j.gpu_count, j.gpu_node, j.gpu_index, bytes(j.gpu_share_percent),
                           j.gpu_used_percent, j.run_ms, j.gpu_ms, j.batch_size)
    return types.Snapshot(
        s.time_ms, s.interval_ms, s.resync, nodes if s.nodes is not None else None, s.nodes_down, tenants,
        types.GpuStates(s.gpus.utilisation_percent, s.gpus.memory_used_bytes), spec, s.removed, jobs,
        types.QueueStates(q.handle, [types.WaitReason(r.value) for r in q.reason], q.since_ms, q.run_ms, q.gpu_ms),
        types.ProgressRecords([], [], [], b"", []),
    )


def test_a_decision_crosses_as_the_generated_types(wit, monkeypatch):
    types, host, _ = wit
    lines = []
    monkeypatch.setattr(host, "log", lambda level, message: lines.append((level, message)))
    exported = export(Limits)
    assert exported.__name__ == "Policy"
    abilities = exported().init("", b"41")
    assert abilities == types.Abilities(places=False)
    w = TestWorld()
    w.node("n0", 8000, 1 << 30, [1 << 30, 1 << 30])
    a = w.add_job(job("a", "cifar10"))
    # A new object per call, as componentize-py makes: the runner lives at module level.
    raw = exported().decide(generated_snapshot(types, w))
    assert raw == types.Decision(
        [
            types.Action(a, types.ActionKind_SetCpu(1000), "capped"),
            types.Action(a, types.ActionKind_Place(types.Placement([types.NodePlacement(0, [1])], True)), ""),
        ],
        2500,
        [],
    )
    assert lines == [(host.Level.INFO, "call 42")]
    assert exported().save_state() == b"42"


def test_errors_cross_as_policy_errors(wit, monkeypatch):
    types, host, err = wit
    monkeypatch.setattr(host, "log", lambda level, message: None)
    exported = export(Limits)
    with pytest.raises(err) as e:
        exported().decide(None)
    assert e.value.value == types.PolicyError_Failed("decide called before init")
    assert exported().save_state() == b""
    exported().init("{}", None)
    with pytest.raises(err) as e:
        exported().decide(generated_snapshot(types, TestWorld()))
    assert e.value.value == types.PolicyError_Failed("no jobs")
    with pytest.raises(err) as e:
        exported().init('{"alpha": 1}', None)
    assert e.value.value == types.PolicyError_InvalidConfig("unknown field `alpha`, there are no fields")
    bad = generated_snapshot(types, TestWorld())
    bad.jobs.handle.append(3)
    with pytest.raises(err) as e:
        exported().decide(bad)
    assert e.value.value.value.startswith("the host sent a malformed snapshot")


def test_every_action_kind_converts(wit):
    from wasmsched.component import to_wit_error, to_wit_kind

    types = wit[0]
    kinds = [
        (Action.lift_memory(1), types.ActionKind_SetMemory(None)),
        (Action.migrate(1, 2), types.ActionKind_Migrate(2)),
        (Action.deliver(1), types.ActionKind_Deliver()),
        (Action.stop(1), types.ActionKind_Stop()),
        (Action.set_gpu_share(1, 0, 30), types.ActionKind_SetGpuShare(types.GpuShare(0, 30))),
        (Action.preempt(1), types.ActionKind_Preempt()),
        (
            Action.resize(1, [(0, [0, 1]), (1, [2])], 512),
            types.ActionKind_Resize(
                types.Resize(types.Placement([types.NodePlacement(0, [0, 1]), types.NodePlacement(1, [2])], False), 512)
            ),
        ),
        (
            Action.resize(1, [(2, [3])]),
            types.ActionKind_Resize(types.Resize(types.Placement([types.NodePlacement(2, [3])], False), None)),
        ),
    ]
    for action, expected in kinds:
        assert to_wit_kind(action.kind, types) == expected
    assert to_wit_error(InvalidConfig("k"), types) == types.PolicyError_InvalidConfig("k")


class Buggy(Policy):
    def decide(self, s: Snapshot) -> Decision:
        raise ZeroDivisionError("oops")


def test_a_bug_is_logged_to_the_host_and_then_traps(wit, monkeypatch):
    types, host, _ = wit
    lines = []
    monkeypatch.setattr(host, "log", lambda level, message: lines.append((level, message)))
    exported = export(Buggy)
    exported().init("", None)
    with pytest.raises(ZeroDivisionError):
        exported().decide(generated_snapshot(types, TestWorld()))
    assert lines[0][0] == host.Level.ERROR and "ZeroDivisionError: oops" in lines[0][1]


def test_a_number_the_contract_cannot_carry_is_a_policy_error_not_a_trap(wit):
    from wasmsched.component import to_wit_decision

    types = wit[0]
    for bad in [
        Action.set_cpu(1, -5),
        Action.set_cpu(1, 1.5),
        Action.set_gpu_share(1, 0, 300),
        Action.stop(-1),
        Action.resize(1, [(0, [0])], 2**32),
        Action.resize(1, [(0, [-1])]),
    ]:
        with pytest.raises(Failed, match="the policy's decision holds"):
            to_wit_decision(Decision().push(bad), types)
    with pytest.raises(Failed, match="the policy's decision holds a job"):
        to_wit_decision(Decision().pending(-1, "no such job"), types)
    assert to_wit_decision(Decision().push(Action.set_cpu(1, 2**64 - 1)), types).actions[0].kind.value == 2**64 - 1


class Room(Policy):
    """Says, for every queued job, its tenant and how many more GPUs that tenant may take."""

    def decide(self, s: Snapshot) -> Decision:
        d = Decision()
        for j in s.queue():
            t = s.tenant(j.tenant)
            d.pending(j.id, f"{t.name} (weight {t.weight:g}, cohort {t.cohort}) has room for {s.room(j.tenant)}")
        return d


def test_tenants_cross_as_the_generated_types_and_are_kept_until_sent_again(wit, monkeypatch):
    from wasmsched.testing import tenant

    types, host, _ = wit
    monkeypatch.setattr(host, "log", lambda level, message: None)
    exported = export(Room)
    exported().init("", None)
    w = TestWorld.gpu_cluster([4])
    w.declare(tenant("a").weight(2.0).quota(3).borrowing_limit(1).cohort("lab"))
    w.declare(tenant("b").quota(2).cohort("lab"))
    a = w.queue_job(job("a1", "cifar10").gpus(1).tenant("a"))
    w.start(a, 0, [0])
    q = w.queue_job(job("a2", "cifar10").gpus(2).tenant("a"))
    raw = exported().decide(generated_snapshot(types, w))
    assert raw.pending == [types.Pending(q, "a (weight 2, cohort lab) has room for 3")]
    snapshot = generated_snapshot(types, w)
    assert snapshot.tenants is None, "unchanged: not sent"
    raw = exported().decide(snapshot)
    assert raw.pending == [types.Pending(q, "a (weight 2, cohort lab) has room for 3")], "the list is kept"


def test_pending_reasons_cross_in_order(wit, monkeypatch):
    types, host, _ = wit
    monkeypatch.setattr(host, "log", lambda level, message: None)
    exported = export(Limits)
    exported().init("", None)
    w = TestWorld()
    w.node("n0", 8000, 1 << 30, [1 << 30, 1 << 30])
    w.add_job(job("a", "cifar10"))
    q = w.queue_job(job("q", "cifar10").gpus(8))
    raw = exported().decide(generated_snapshot(types, w))
    assert raw.pending == [types.Pending(q, "8 GPUs asked")]
