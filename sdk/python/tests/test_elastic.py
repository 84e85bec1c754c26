"""Contract 0.3.0 through the SDK: GPU types, nodes that take no work, elastic jobs (their
scaling and batch size), the resize action and why queued jobs wait; the rules' checks of
them as sdk/src/sched.rs tests them."""

from __future__ import annotations

import pytest

from wasmsched import Action, Decision, Policy, Resize, Scaling, rules
from wasmsched.recording import decision_to_json, snapshot_from_json
from wasmsched.testing import Harness, TestWorld, job, seen


def test_a_node_shows_its_gpu_type_and_whether_it_takes_work():
    w = TestWorld.gpu_cluster([4, 4])
    w.set_gpu_type(1, "a100")
    w.set_takes_work(0, False)
    r = seen(w)
    s = r.view()
    assert (s.node(0).gpu_type, s.node(1).gpu_type) == ("", "a100")
    assert (s.node(0).takes_work, s.node(1).takes_work) == (False, True)
    assert s.nodes_down == [0]
    w.set_takes_work(0, True)
    w.set_gpu_type(0, "t4")
    r.decide(w.snapshot())
    s = r.view()
    assert s.node(0).takes_work and s.nodes_down == []
    assert s.node(0).gpu_type == "t4", "a new GPU type sends the nodes again"


def test_a_rigid_job_lists_its_own_gpu_count_and_an_elastic_one_its_counts_and_batch_sizes():
    w = TestWorld.gpu_cluster([4, 4])
    rigid = w.queue_job(job("r", "cifar10").gpus(2))
    e = w.queue_job(job("e", "cifar10").gpus(1).elastic([4, 2], (128, 1024)))
    w.start(e, 0, [0])
    s = seen(w).view()
    r, j = s.job(rigid), s.job(e)
    assert r.scaling == Scaling([2], 0, 0) and not r.is_elastic and r.batch_size == 0
    assert j.scaling == Scaling([1, 2, 4], 128, 1024), "ascending, holding the GPUs it asks for"
    assert j.is_elastic and j.batch_size == 128, "it starts at the smallest batch size"


def test_an_elastic_job_is_resized_within_its_counts_and_batch_sizes():
    w = TestWorld.gpu_cluster([4, 4])
    e = w.queue_job(job("e", "cifar10").gpus(1).elastic([1, 2, 4], (128, 1024)))
    w.start(e, 0, [0])
    r = seen(w)
    s = r.view()
    grow = Decision().push(Action.resize(e, [(0, [0, 1]), (1, [0, 1])], 512))
    assert rules.check(s, grow) is None
    three = Decision().push(Action.resize(e, [(0, [0, 1, 2])]))
    assert rules.check(s, three) == "action 0: job 0 runs on [1, 2, 4] GPUs (its scaling); the placement gives 3"
    big = Decision().push(Action.resize(e, [(0, [0, 1])], 4096))
    assert rules.check(s, big) == "action 0: job 0 accepts batch sizes 128\u20131024; the resize asks for 4096"
    w.apply(grow)
    r.decide(w.snapshot())
    j = r.view().job(e)
    assert ([(g.node, g.index) for g in j.gpus], j.batch_size) == ([(0, 0), (0, 1), (1, 0), (1, 1)], 512)
    w.apply(Decision().push(Action.resize(e, [(1, [2, 3])])))
    r.decide(w.snapshot())
    j = r.view().job(e)
    assert (j.node, len(j.gpus), j.batch_size) == (1, 2, 512), "no batch size keeps it"


def test_a_resize_is_refused_a_batch_size_for_a_job_without_one_an_empty_entry_and_a_down_node():
    w = TestWorld.gpu_cluster([4, 4, 4])
    rigid = w.queue_job(job("r", "cifar10").gpus(2))
    w.start(rigid, 0, [0, 1])
    e = w.queue_job(job("e", "cifar10").gpus(2).elastic([2, 4], (64, 256)))
    w.start(e, 1, [0, 1])
    w.set_takes_work(2, False)
    s = seen(w).view()
    got = rules.verdicts(
        s,
        Decision(
            [
                Action.resize(rigid, [(0, [0, 1])], 32),
                Action.resize(e, [(0, [2, 3]), (1, [])]),
                Action.resize(e, [(2, [0, 1])]),
                Action.resize(e, [(0, [0, 1])]),
                Action.resize(e, [(1, [0, 1, 2, 3])], 256),
                Action.resize(e, [(1, [0, 1])]),
            ]
        ),
    )
    assert [None if p is None else p.kind for p in got] == [
        "BatchOutOfRange",
        "EmptyEntry",
        "NodeDown",
        "GpuHeld",
        None,
        "AlreadyMoved",
    ]
    assert str(got[0]) == "job 0 has no batch size the host sets; the resize asks for 32"
    assert str(got[1]) == "the resize names node n1 with no GPU; leave it out"
    assert str(got[2]) == "node n2 cannot take work now (NotReady or cordoned)"


def test_a_resize_gives_up_its_own_gpus_to_a_later_placement():
    w = TestWorld.gpu_cluster([2])
    e = w.queue_job(job("e", "cifar10").gpus(2).elastic([1, 2], (0, 0)))
    w.start(e, 0, [0, 1])
    q = w.queue_job(job("q", "cifar10").gpus(1))
    early = w.queue_job(job("early", "cifar10").gpus(1))
    s = seen(w).view()
    d = Decision([Action.place(early, 0, [1]), Action.resize(e, [(0, [0])]), Action.place(q, 0, [1])])
    got = [None if p is None else p.kind for p in rules.verdicts(s, d)]
    assert got == ["GpuHeld", None, None]


def test_nothing_is_placed_or_migrated_onto_a_node_that_takes_no_work():
    w = TestWorld.gpu_cluster([4, 4])
    w.set_takes_work(1, False)
    a = w.queue_job(job("a", "cifar10").gpus(2))
    b = w.add_job(job("b", "cifar10"), node=0)
    s = seen(w).view()
    assert rules.check(s, Decision().push(Action.place(a, 1, [0, 1]))) == (
        "action 0: node n1 cannot take work now (NotReady or cordoned)"
    )
    assert rules.check(s, Decision().push(Action.migrate(b, 1))) == (
        "action 0: node n1 cannot take work now (NotReady or cordoned)"
    )
    assert rules.check(s, Decision().push(Action.place(a, 0, [0, 1]))) is None


def test_an_elastic_job_is_placed_on_any_of_its_counts_spread_over_nodes():
    w = TestWorld.gpu_cluster([4, 4])
    e = w.queue_job(job("e", "cifar10").gpus(2).elastic([2, 4, 8], (32, 512)))
    s = seen(w).view()
    assert rules.check(s, Decision().push(Action.place_on(e, [(0, [0, 1, 2]), (1, [0])]))) is None
    assert rules.check(s, Decision().push(Action.place(e, 0, [0, 1, 2]))) == (
        "action 0: job 0 runs on [2, 4, 8] GPUs (its scaling); the placement gives 3"
    )


def test_a_resize_naming_more_node_entries_than_nodes_is_refused_whole():
    w = TestWorld.gpu_cluster([4])
    e = w.queue_job(job("e", "cifar10").gpus(1).elastic([1, 2], (0, 0)))
    w.start(e, 0, [0])
    s = seen(w).view()
    with pytest.raises(rules.Oversized, match="action 0 places on 2 node entries; the cluster has 1 nodes"):
        rules.verdicts(s, Decision().push(Action.resize(e, [(0, [1]), (0, [2])])))


class Waits(Policy):
    """Leaves every queued job waiting and says why."""

    def decide(self, s):
        d = Decision()
        for j in s.queue():
            d.pending(j.id, f"{j.gpus_asked} GPUs asked, {sum(len(s.free_gpus(n.id)) for n in s.nodes())} free")
        return d


def test_a_decision_says_why_queued_jobs_wait():
    w = TestWorld.gpu_cluster([2])
    a = w.queue_job(job("a", "cifar10").gpus(4))
    b = w.queue_job(job("b", "cifar10").gpus(3))
    d = Harness(Waits(), w).tick(1.0)
    assert d.pending_reasons == [(a, "4 GPUs asked, 2 free"), (b, "3 GPUs asked, 2 free")]
    assert d.is_empty(), "a reason is not an action"
    assert decision_to_json(d)["pending"] == [
        {"job": a, "reason": "4 GPUs asked, 2 free"},
        {"job": b, "reason": "3 GPUs asked, 2 free"},
    ]


def test_a_resize_is_written_as_serde_writes_it_and_read_back_from_a_recording():
    d = Decision().push(Action.resize(1, [(0, [0, 1])], 256))
    assert d.actions[0].kind == Resize(((0, (0, 1)),), 256)
    assert decision_to_json(d)["actions"][0]["kind"] == {
        "Resize": {"placement": {"nodes": [{"node": 0, "gpus": [0, 1]}], "share": False}, "batch_size": 256}
    }
    w = TestWorld.gpu_cluster([2])
    w.set_gpu_type(0, "rtx")
    w.set_takes_work(0, False)
    e = w.queue_job(job("e", "cifar10").gpus(1).elastic([1, 2], (16, 64)))
    w.start(e, 0, [0])
    raw = w.snapshot()
    as_json = {
        "time_ms": 0, "interval_ms": 0, "resync": True, "nodes_down": [0],
        "nodes": [{"name": "n0", "cpu_millicores": 8000, "memory_bytes": 1, "gpu_memory_bytes": [1, 1],
                   "gpu_type": "rtx"}],
        "gpus": {"utilisation_percent": [0.0, 0.0], "memory_used_bytes": [0, 0]},
        "added": [{"handle": e, "name": "e", "model": "cifar10", "kind": "Training", "metrics": [],
                   "arrival_ms": 0, "gpus": 1, "replicas": 1,
                   "scaling": {"gpu_counts": [1, 2], "batch_size_min": 16, "batch_size_max": 64}}],
        "removed": [],
        "jobs": {"handle": [e], "node": [0], "cpu_limit_millicores": [0], "memory_limit_bytes": [0],
                 "cpu_used_millicores": [0], "memory_used_bytes": [0], "gpu_count": [1], "gpu_node": [0],
                 "gpu_index": [0], "gpu_share_percent": [0], "gpu_used_percent": [0.0], "run_ms": [0],
                 "gpu_ms": [0], "batch_size": [16]},
        "queue": {"handle": [], "reason": [], "since_ms": [], "run_ms": [], "gpu_ms": []},
        "progress": {"job": [], "time_ms": [], "epoch": [], "value_count": [], "values": []},
    }
    read = snapshot_from_json(as_json)
    assert read.nodes_down == raw.nodes_down == [0]
    assert read.nodes[0].gpu_type == raw.nodes[0].gpu_type == "rtx"
    assert read.added[0].scaling == raw.added[0].scaling == Scaling([1, 2], 16, 64)
    assert read.jobs.batch_size == raw.jobs.batch_size == [16]
