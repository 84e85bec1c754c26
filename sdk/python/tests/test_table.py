"""The job table: each snapshot's delta folded in as the Rust SDK's view/table.rs does."""

from __future__ import annotations

from enum import Enum
from types import SimpleNamespace

import pytest

from wasmsched import HISTORY_LIMIT, Decision, Direction, Failed, JobKind, Policy, Runner, WaitReason, gib
from wasmsched.testing import TestWorld, job


class Inspect(Policy):
    """Decides nothing; the tests read the runner's view."""

    def decide(self, snapshot):
        return Decision()


def world() -> TestWorld:
    w = TestWorld()
    w.node("n0", 8000, gib(16))
    return w


def test_the_table_keeps_history_across_ticks_and_marks_new_records():
    w = world()
    a = w.add_job(job("a", "deepspeech2").metric("wer", Direction.LOWER_IS_BETTER))
    r = Runner(Inspect())
    w.report(a, 1, [40.0])
    r.decide(w.snapshot())
    w.advance(30.0)
    w.report(a, 2, [20.0])
    w.set_cpu_use(a, 1200)
    r.decide(w.snapshot())
    j = r.view().job(a)
    assert len(j.history) == 2
    assert [p.epoch for p in j.new_records] == [2]
    assert j.cpu_use == 1200
    assert [v for _, v in j.normalised()] == [1.0, 0.5]
    assert j.first_seen == 0.0
    assert j.latest.value == 20.0 and j.epoch == 2


def test_removed_jobs_leave_and_late_jobs_join_in_handle_order():
    w = world()
    a = w.add_job(job("a", "ncf"))
    b = w.add_job(job("b", "ncf"))
    r = Runner(Inspect())
    r.decide(w.snapshot())
    w.remove_job(a)
    w.advance(30.0)
    c = w.add_job(job("c", "bert").inference())
    r.decide(w.snapshot())
    view = r.view()
    assert [j.id for j in view.jobs()] == [b, c]
    assert view.job(a) is None
    assert view.job(c).kind is JobKind.INFERENCE
    assert view.job(c).first_seen == 30.0, "first seen is the snapshot's time when added"
    assert view.job(b).first_seen == 0.0


def test_a_resync_forgets_every_job():
    w = world()
    w.add_job(job("a", "ncf"))
    r = Runner(Inspect())
    r.decide(w.snapshot())
    fresh = TestWorld()
    fresh.node("n0", 8000, gib(16))
    r.decide(fresh.snapshot())
    assert r.view().job_count == 0 and list(r.view().jobs()) == []


def test_jobs_added_out_of_order_are_sorted_and_a_duplicate_handle_is_kept_once():
    w = world()
    w.add_job(job("a", "ncf"))
    w.add_job(job("b", "ncf"))
    s = w.snapshot()
    s.added.reverse()
    s.added.append(s.added[0])
    r = Runner(Inspect())
    r.decide(s)
    assert [j.id for j in r.view().jobs()] == [0, 1]


def test_ragged_columns_from_a_broken_host_are_refused_not_trusted():
    w = world()
    w.add_job(job("a", "ncf"))
    r = Runner(Inspect())
    s = w.snapshot()
    s.jobs.cpu_used_millicores.clear()
    with pytest.raises(Failed) as e:
        r.decide(s)
    assert e.value.message == "the host sent a malformed snapshot: job-state columns differ in length"


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda s: s.progress.epoch.pop(), "progress columns differ in length"),
        (lambda s: s.progress.values.pop(), "progress values do not add up to the value counts"),
        (lambda s: s.queue.since_ms.append(1), "queue columns differ in length"),
        (lambda s: s.jobs.gpu_node.append(0), "job-state columns differ in length"),
    ],
)
def test_each_malformed_column_is_named(break_it, message):
    w = world()
    a = w.add_job(job("a", "ncf"))
    w.queue_job(job("q", "ncf"))
    w.report(a, 1, [0.5])
    s = w.snapshot()
    break_it(s)
    with pytest.raises(Failed, match=f"^the host sent a malformed snapshot: {message}$"):
        Runner(Inspect()).decide(s)


def test_nodes_are_kept_between_ticks_and_gpu_use_is_read_from_the_columns():
    w = TestWorld()
    w.node("cpu-only", 8000, gib(16))
    g = w.node("gpu", 16000, gib(64), [gib(32)] * 2)
    r = Runner(Inspect())
    first = w.snapshot()
    assert first.nodes is not None
    r.decide(first)
    w.set_gpu_use(g, 1, 60.0, gib(3))
    second = w.snapshot()
    assert second.nodes is None, "unchanged nodes are not resent"
    r.decide(second)
    view = r.view()
    assert len(view.nodes()) == 2
    node = view.node(g)
    assert (node.name, node.cpu, node.memory) == ("gpu", 16000, gib(64))
    assert len(node.gpus) == 2
    assert node.gpus[1].utilisation_percent == 60.0
    assert (node.gpus[1].memory_used, node.gpus[1].memory_total) == (gib(3), gib(32))
    assert view.node(0).gpus == []
    assert view.node(2) is None

    bad = w.snapshot()
    bad.gpus.memory_used_bytes.pop()
    with pytest.raises(Failed) as e:
        r.decide(bad)
    assert "GPU columns (2 and 1 entries) do not match the nodes' 2 GPUs" in e.value.message


def test_zero_limits_and_shares_mean_none_and_numbers_come_from_the_columns():
    w = world()
    a = w.add_job(job("a", "ncf"))
    b = w.add_job(job("b", "ncf"))
    w.set_cpu_limit(a, 1500)
    w.set_memory_limit(a, gib(2))
    w.set_memory_use(b, gib(1))
    w.advance(10.0)
    r = Runner(Inspect())
    r.decide(w.snapshot())
    view = r.view()
    ja, jb = view.job(a), view.job(b)
    assert (ja.cpu_limit, ja.memory_limit, ja.gpu_share) == (1500, gib(2), None)
    assert (jb.cpu_limit, jb.memory_limit, jb.memory_use) == (None, None, gib(1))
    assert ja.run_time == 10.0 and ja.attained_service == 10.0


def test_history_is_capped_and_fresh_counts_only_this_ticks_records():
    w = world()
    a = w.add_job(job("a", "cifar10").metric("accuracy"))
    for epoch in range(600):
        w.report(a, epoch, [epoch / 600])
    r = Runner(Inspect())
    r.decide(w.snapshot())
    j = r.view().job(a)
    assert len(j.history) == HISTORY_LIMIT
    assert len(j.new_records) == HISTORY_LIMIT
    assert j.history[0].epoch == 600 - HISTORY_LIMIT, "the oldest are dropped first"
    w.advance(1.0)
    w.report(a, 600, [1.0])
    r.decide(w.snapshot())
    j = r.view().job(a)
    assert len(j.history) == HISTORY_LIMIT
    assert [p.epoch for p in j.new_records] == [600]
    w.advance(1.0)
    r.decide(w.snapshot())
    assert r.view().job(a).new_records == []


def test_the_queue_is_read_from_its_columns_and_a_placed_job_leaves_it():
    w = TestWorld.gpu_cluster([2])
    a = w.add_job(job("a", "cifar10").gpus(1))
    w.start(a, 0, [1])
    w.advance(30.0)
    q = w.queue_job(job("q", "bert").gpus(2))
    w.advance(20.0)
    r = Runner(Inspect())
    r.decide(w.snapshot())
    view = r.view()
    assert (view.job_count, view.queue_len) == (1, 1)
    assert [j.id for j in view.queue()] == [q]
    jq = view.job(q)
    assert jq.is_queued and jq.wait_reason is WaitReason.NEVER_STARTED
    assert jq.wait(view.time) == 20.0 and jq.gpus == [] and jq.gpus_asked == 2
    assert jq.arrival == 30.0
    ja = view.job(a)
    assert not ja.is_queued and ja.wait(view.time) == 0.0
    assert [(g.node, g.index) for g in ja.gpus] == [(0, 1)]
    assert view.gpu_holders(0) == [0, 1] and view.free_gpus(0) == [0]
    assert ja.attained_service == 50.0, "GPU time counts each GPU held"

    w.preempt(a)
    w.start(q, 0, [0, 1])
    w.advance(30.0)
    r.decide(w.snapshot())
    view = r.view()
    assert [j.id for j in view.queue()] == [a]
    assert view.job(a).wait_reason is WaitReason.PREEMPTED
    assert view.job(a).run_time == 50.0
    assert view.free_gpus(0) == []


class WitKind(Enum):
    """Stands in for a generated enum: another class, the same values."""

    TRAINING = 0
    INFERENCE = 1


def test_the_table_reads_generated_records_by_attribute_and_enums_by_value():
    ns = SimpleNamespace
    spec = ns(
        handle=7, name="x", model="m", kind=WitKind.INFERENCE, metrics=[ns(name="lat", direction=WitKind.INFERENCE)],
        tiers=ns(deliverable=0.8, final=0.9), qoe_target=20.0, max_epochs=None, labels=[("team", "a")],
        arrival_ms=1500, gpus=0, replicas=0, scaling=ns(gpu_counts=[0], batch_size_min=0, batch_size_max=0),
    )
    jobs = ns(
        handle=[7], node=[0], cpu_limit_millicores=[0], memory_limit_bytes=[0], cpu_used_millicores=[300],
        memory_used_bytes=[5], gpu_count=[0], gpu_node=[], gpu_index=[], gpu_share_percent=b"\x00",
        gpu_used_percent=[0.0], run_ms=[0], gpu_ms=[0], batch_size=[0],
    )
    raw = ns(
        time_ms=2000, interval_ms=0, resync=True, nodes=[ns(name="n", cpu_millicores=1000, memory_bytes=1,
        gpu_memory_bytes=[], gpu_type="")], nodes_down=[], gpus=ns(utilisation_percent=[], memory_used_bytes=[]), added=[spec], removed=[],
        jobs=jobs, queue=ns(handle=[], reason=[], since_ms=[], run_ms=[], gpu_ms=[]),
        progress=ns(job=[7], time_ms=[1900], epoch=[1], value_count=b"\x02", values=[12.0, 3.0]),
    )
    r = Runner(Inspect())
    r.decide(raw)
    j = r.view().job(7)
    assert j.kind is JobKind.INFERENCE and j.direction is Direction.LOWER_IS_BETTER
    assert j.label("team") == "a" and j.label("nope") is None
    assert (j.tiers.deliverable, j.tiers.final, j.qoe_target) == (0.8, 0.9, 20.0)
    assert j.replicas == 1, "zero replicas read as one"
    assert j.latest.values == (12.0, 3.0) and j.latest.time == 1.9
    assert (j.arrival, r.view().time) == (1.5, 2.0)
