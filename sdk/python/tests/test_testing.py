"""The native harness: the same deltas a host sends, and decisions put into force."""

from __future__ import annotations

from wasmsched import Action, Decision, InvalidConfig, Policy, Snapshot, WaitReason, gib
from wasmsched.testing import Harness, TestWorld, job, placed


class Nothing(Policy):
    def decide(self, snapshot: Snapshot) -> Decision:
        return Decision()


class Scripted(Policy):
    """Returns whatever the test put in ``next``, and records what it saw."""

    def __init__(self) -> None:
        self.next = Decision()
        self.seen: list[Snapshot] = []

    def decide(self, snapshot: Snapshot) -> Decision:
        self.seen.append(snapshot)
        d, self.next = self.next, Decision()
        return d


def test_the_readme_example_decides_nothing():
    world = TestWorld()
    world.node("n0", 8000, gib(32))
    a = world.add_job(job("a", "cifar10").metric("accuracy"))
    world.report(a, 1, [0.42])
    h = Harness(Nothing(), world)
    assert h.tick(30.0).is_empty()
    assert h.runner.view().job(a).latest.value == 0.42


def test_the_first_snapshot_is_a_resync_and_later_ones_are_deltas():
    w = TestWorld()
    w.node("n0", 8000, gib(16))
    a = w.add_job(job("a", "ncf"))
    first = w.snapshot()
    assert first.resync and first.interval_ms == 0 and [s.handle for s in first.added] == [a]
    w.advance(30.0)
    w.remove_job(a)
    b = w.add_job(job("b", "ncf"))
    second = w.snapshot()
    assert not second.resync and second.interval_ms == 30000 and second.time_ms == 30000
    assert second.removed == [a] and [s.handle for s in second.added] == [b] and second.nodes is None
    w.node("n1", 4000, gib(8))
    assert len(w.snapshot().nodes) == 2, "a new node resends the node list"
    c = w.add_job(job("c", "ncf"))
    w.remove_job(c)
    third = w.snapshot()
    assert third.added == [] and third.removed == [c]


def test_the_harness_puts_limits_stops_placements_and_preemptions_into_force():
    w = TestWorld.gpu_cluster([2, 2])
    a = w.add_job(job("a", "cifar10").gpus(1))
    b = w.add_job(job("b", "cifar10"))
    q = w.queue_job(job("q", "bert").gpus(2).replicas(2))
    p = Scripted()
    h = Harness(p, w)
    p.next = Decision().push(Action.set_cpu(a, 500)).push(Action.set_memory(a, gib(1))).push(Action.stop(b))
    p.next.push(Action.place_on(q, [(0, [0]), (1, [1])]))
    d = h.tick(30.0)
    assert placed(d) == [(q, [(0, [0]), (1, [1])])]
    h.tick(30.0)
    view = h.runner.view()
    assert view.job(a).cpu_limit == 500 and view.job(a).memory_limit == gib(1)
    assert view.job(b) is None, "a stopped job is removed"
    jq = view.job(q)
    assert not jq.is_queued and [(g.node, g.index) for g in jq.gpus] == [(0, 0), (1, 1)]
    p.next = Decision().push(Action.preempt(q)).push(Action.migrate(a, 1)).push(Action.lift_cpu(a))
    h.tick(30.0)
    h.tick(30.0)
    view = h.runner.view()
    assert view.job(q).wait_reason is WaitReason.PREEMPTED and view.job(q).run_time == 60.0
    assert view.job(q).attained_service == 120.0, "two GPUs for 60 s"
    assert (view.job(a).node, view.job(a).cpu_limit) == (1, None)
    assert [s.interval for s in p.seen] == [0.0, 30.0, 30.0, 30.0]


def test_a_policy_is_built_from_its_config_json():
    try:
        Harness.from_config(Nothing, '{"alpha": 1}')
    except InvalidConfig as e:
        assert "alpha" in e.message
    else:
        raise AssertionError("an unknown key was taken")
    assert isinstance(Harness.from_config(Nothing, "").policy, Nothing)
