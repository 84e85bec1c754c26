"""Tenants through the SDK: whose a job is, what each tenant is entitled to (a list that
crosses only when it changes, as the nodes do), and the limits the host holds them to, as
sdk/src/view/tenant.rs, sdk/src/testing.rs and rules/src/tenants.rs test them."""

from __future__ import annotations

import json

import pytest

from wasmsched import Action, Decision, Failed, Policy, Runner, rules
from wasmsched.recording import policy_calls, snapshot_from_json
from wasmsched.rules import Entitlement, Ledger, OverLimit
from wasmsched.testing import Inspect, TestWorld, job, seen, tenant
from wasmsched.stats import entitled


def test_a_job_names_its_tenant_and_the_view_shows_what_each_tenant_is_entitled_to():
    w = TestWorld.gpu_cluster([4])
    w.declare(tenant("research").weight(2.0).quota(4).borrowing_limit(2).cohort("lab"))
    w.declare(tenant("prod").quota(8))
    a = w.add_job(job("a", "cifar10").tenant("research"))
    b = w.add_job(job("b", "cifar10"))
    c = w.queue_job(job("c", "bert").tenant("adhoc"))
    s = seen(w).view()
    assert (s.job(a).tenant, s.job(b).tenant, s.job(c).tenant) == ("research", "default", "adhoc")
    assert [t.name for t in s.tenants()] == ["research", "prod", "default", "adhoc"], "declared ones first"
    assert [t.index for t in s.tenants()] == [0, 1, 2, 3]
    r = s.tenant("research")
    assert (r.weight, r.quota, r.borrowing_limit, r.cohort, r.limit()) == (2.0, 4, 2, "lab", 6)
    p = s.tenant("prod")
    assert (p.weight, p.quota, p.borrowing_limit, p.cohort, p.limit()) == (1.0, 8, None, None, 8), "its quota"
    d = s.tenant("default")
    assert (d.weight, d.quota, d.borrowing_limit, d.cohort, d.limit()) == (1.0, None, None, None, None)
    assert s.tenant("nobody") is None and s.tenant_index("adhoc") == 3
    assert r.entitlement() == Entitlement("research", 4, 2, "lab")


def test_the_tenants_cross_when_they_change_and_are_kept_otherwise():
    w = TestWorld.gpu_cluster([2])
    w.declare(tenant("a").quota(1))
    r = Runner(Inspect())
    first = w.snapshot()
    assert first.resync and [t.name for t in first.tenants] == ["a"], "a resync carries them"
    r.decide(first)
    second = w.snapshot()
    assert second.tenants is None, "unchanged: not sent"
    r.decide(second)
    assert [t.name for t in r.view().tenants()] == ["a"], "the last list is kept"
    w.queue_job(job("x", "cifar10").tenant("b"))
    third = w.snapshot()
    assert [t.name for t in third.tenants] == ["a", "b"], "a job naming a new tenant sends the list again"
    r.decide(third)
    assert r.view().tenant("b").quota is None
    w.queue_job(job("y", "cifar10").tenant("b"))
    assert w.snapshot().tenants is None, "a tenant already known changes nothing"
    w.declare(tenant("b").quota(3))
    fourth = w.snapshot()
    assert [(t.name, t.quota_gpus) for t in fourth.tenants] == [("a", 1), ("b", 3)], "declared, in declaration order"
    w.declare(tenant("a").quota(2).cohort("lab"))
    fifth = w.snapshot()
    assert [(t.name, t.quota_gpus, t.cohort) for t in fifth.tenants] == [("a", 2, "lab"), ("b", 3, "")], "replaced"
    r.decide(fifth)
    assert r.view().tenant("a").cohort == "lab"


def test_a_job_naming_no_tenant_is_the_default_ones():
    w = TestWorld()
    w.node("n0", 8000, 1 << 30)
    a = w.add_job(job("a", "cifar10").tenant("  "))
    s = seen(w).view()
    assert s.job(a).tenant == "default" and [t.name for t in s.tenants()] == ["default"]


def test_a_malformed_snapshot_leaves_the_tenants_as_they_were():
    w = TestWorld.gpu_cluster([1])
    w.declare(tenant("a"))
    r = seen(w)
    w.declare(tenant("b"))
    bad = w.snapshot()
    bad.gpus.utilisation_percent.append(0.0)
    with pytest.raises(Failed, match="malformed"):
        r.decide(bad)
    assert [t.name for t in r.view().tenants()] == ["a"]


def test_a_tenant_without_a_cohort_holds_its_quota_at_most():
    ledger = Ledger([Entitlement("a", 4, 8, None), Entitlement("free")])
    ledger.hold(0, 3)
    assert ledger.room(0) == 1 and ledger.held(0) == 3
    ledger.check(0, 1)
    with pytest.raises(OverLimit) as e:
        ledger.check(0, 2)
    assert str(e.value) == "tenant a holds 3 GPUs of its limit of 4 (its quota); 2 more would pass it"
    ledger.hold(1, 1000)
    assert ledger.room(1) is None, "no quota, no limit"
    ledger.check(1, 1000)


def test_a_cohort_lends_idle_quota_up_to_each_borrowing_limit():
    ledger = Ledger([Entitlement("a", 4, 2, "lab"), Entitlement("b", 4, None, "lab"), Entitlement("c", 0, None, "lab")])
    assert ledger.room(0) == 6, "quota 4 + borrowing 2"
    assert ledger.room(1) == 8, "the whole cohort"
    assert ledger.room(2) == 8, "a pure borrower"
    ledger.hold(0, 6)
    with pytest.raises(OverLimit, match="quota 4 \\+ borrowing 2"):
        ledger.check(0, 1)
    assert ledger.room(1) == 2, "a lent two of b's four"
    with pytest.raises(OverLimit) as e:
        ledger.check(2, 3)
    assert e.value.kind == "Cohort" and (e.value.fields["holds"], e.value.fields["quotas"]) == (6, 8)
    assert str(e.value) == (
        "tenant c's cohort lab holds 6 GPUs of its members' 8 of quota; 3 more would pass it (nothing idle to borrow)"
    )
    ledger.release(0, 6)
    assert ledger.room(2) == 8


def test_a_member_without_a_quota_neither_lends_nor_counts_against_its_cohort():
    ledger = Ledger([Entitlement("a", 2, None, "lab"), Entitlement("free", None, None, "lab")])
    ledger.hold(1, 50)
    assert ledger.room(0) == 2 and ledger.room(1) is None
    ledger.check(1, 100)


def test_unknown_tenants_and_zero_asks_pass():
    ledger = Ledger([Entitlement("a", 0)])
    ledger.check(7, 100)
    ledger.check(0, 0)
    ledger.hold(7, 3)
    ledger.release(0, 3)
    assert ledger.held(0) == 0 and ledger.room(7) is None
    assert ledger.limits_anything()
    assert not Ledger([Entitlement("x", None, None, "c")]).limits_anything()


def test_the_snapshots_ledger_counts_what_each_tenants_running_jobs_hold():
    w = TestWorld.gpu_cluster([4, 4])
    w.declare(tenant("a").quota(2))
    w.declare(tenant("b").quota(2).borrowing_limit(1).cohort("lab"))
    w.declare(tenant("c").quota(2).cohort("lab"))
    a = w.queue_job(job("a", "cifar10").gpus(1).tenant("a"))
    w.start(a, 0, [0])
    b = w.queue_job(job("b", "cifar10").gpus(2).tenant("b"))
    w.start(b, 0, [1, 2])
    w.queue_job(job("waits", "cifar10").gpus(4).tenant("c"))
    d = w.queue_job(job("d", "cifar10").gpus(4))
    w.start(d, 1, [0, 1, 2, 3])
    s = seen(w).view()
    ledger = s.ledger()
    assert [ledger.held(t.index) for t in s.tenants()] == [1, 2, 0, 4], "a queued job holds nothing"
    assert (s.room("a"), s.room("b"), s.room("c"), s.room("default"), s.room("nobody")) == (1, 1, 2, None, None)


def test_without_any_quota_nothing_is_limited_or_counted():
    w = TestWorld.gpu_cluster([2])
    a = w.queue_job(job("a", "cifar10").gpus(2))
    w.start(a, 0, [0, 1])
    s = seen(w).view()
    assert s.room("default") is None and s.ledger().held(0) == 0


def tenant_world() -> tuple[TestWorld, list[int]]:
    """The conformance vectors' tenant cluster (tests/tests/conformance/checks.rs)."""
    w = TestWorld.gpu_cluster([4, 4])
    w.declare(tenant("a").quota(2))
    w.declare(tenant("b").quota(2).borrowing_limit(1).cohort("lab"))
    w.declare(tenant("c").quota(2).cohort("lab"))
    jobs = [
        w.queue_job(job("j0", "m").gpus(1).tenant("a")),
        w.queue_job(job("j1", "m").gpus(2).tenant("a")),
        w.queue_job(job("j2", "m").gpus(1).tenant("b")),
        w.queue_job(job("j3", "m").gpus(3).tenant("b")),
        w.queue_job(job("j4", "m").gpus(2).tenant("c")),
        w.queue_job(job("j5", "m").gpus(2).tenant("c")),
        w.queue_job(job("j6", "m").gpus(4)),
    ]
    w.start(jobs[0], 0, [0])
    w.start(jobs[2], 0, [1])
    return w, jobs


def test_the_rules_refuse_a_placement_past_its_tenants_quota_until_a_preemption_makes_room():
    w, j = tenant_world()
    view = seen(w).view()
    d = Decision([Action.place_on(j[1], [(1, [0, 1])]), Action.preempt(j[0]), Action.place_on(j[1], [(1, [0, 1])])])
    got = [None if p is None else str(p) for p in rules.verdicts(view, d)]
    assert got == ["tenant a holds 1 GPUs of its limit of 2 (its quota); 2 more would pass it", None, None]
    assert rules.verdicts(view, d)[0].kind == "OverTenantLimit"
    assert rules.check(view, d).startswith("action 0: tenant a holds 1 GPUs")


def test_the_rules_let_a_tenant_borrow_within_its_cohort_up_to_its_borrowing_limit_and_the_idle_quota():
    w, j = tenant_world()
    view = seen(w).view()
    d = Decision([
        Action.place_on(j[3], [(1, [0, 1, 2])]),
        Action.place_on(j[4], [(0, [2, 3])]),
        Action.place_on(j[5], [(1, [0, 1])]),
        Action.place_on(j[6], [(1, [0, 1, 2, 3])], share=True),
    ])
    got = [None if p is None else str(p) for p in rules.verdicts(view, d)]
    assert got == [
        "tenant b holds 1 GPUs of its limit of 3 (quota 2 + borrowing 1); 3 more would pass it",
        None,
        "tenant c's cohort lab holds 3 GPUs of its members' 4 of quota; 2 more would pass it (nothing idle to borrow)",
        None,
    ]


def test_a_resize_counts_only_the_gpus_it_adds():
    w = TestWorld.gpu_cluster([4])
    w.declare(tenant("a").quota(3))
    e = w.queue_job(job("e", "cifar10").gpus(2).elastic([1, 2, 4], (0, 0)).tenant("a"))
    w.start(e, 0, [0, 1])
    view = seen(w).view()
    assert rules.check(view, Decision().push(Action.resize(e, [(0, [0])]))) is None
    assert rules.check(view, Decision().push(Action.resize(e, [(0, [0, 1, 2, 3])]))) == (
        "action 0: tenant a holds 2 GPUs of its limit of 3 (its quota); 2 more would pass it"
    )


def test_a_recording_carries_tenants_and_one_from_before_them_reads_as_the_default_tenant():
    spec = {"handle": 0, "name": "a", "model": "m", "kind": "Training", "metrics": [], "tiers": None,
            "qoe_target": None, "max_epochs": None, "labels": [], "arrival_ms": 0, "gpus": 0, "replicas": 1}
    columns = {
        "jobs": {k: [] for k in ("handle", "node", "cpu_limit_millicores", "memory_limit_bytes",
                                 "cpu_used_millicores", "memory_used_bytes", "gpu_count", "gpu_node",
                                 "gpu_index", "gpu_share_percent", "gpu_used_percent", "run_ms", "gpu_ms")},
        "queue": {"handle": [0], "reason": ["NeverStarted"], "since_ms": [0], "run_ms": [0], "gpu_ms": [0]},
        "progress": {"job": [], "time_ms": [], "epoch": [], "value_count": [], "values": []},
        "gpus": {"utilisation_percent": [], "memory_used_bytes": []},
    }
    old = {"time_ms": 0, "interval_ms": 0, "resync": True, "nodes": [], "added": [spec], "removed": [], **columns}
    raw = snapshot_from_json(old)
    assert raw.tenants is None and raw.added[0].tenant == "default"
    new = {**old, "tenants": [{"name": "t", "weight": 2.5, "quota_gpus": 4, "borrowing_limit_gpus": None,
                               "cohort": "lab"}], "added": [{**spec, "tenant": "t"}]}
    r = Runner(Inspect())
    r.decide(snapshot_from_json(new))
    s = r.view()
    t = s.tenant("t")
    assert s.job(0).tenant == "t" and (t.weight, t.quota, t.borrowing_limit, t.cohort) == (2.5, 4, None, "lab")
    # A tick the policy was not asked on carried the list; the next one it was asked on did not.
    later = {**old, "resync": False, "added": [], "queue": columns["queue"], "interval_ms": 1000}
    lines = [json.dumps({"tick": 0, "snapshot": new, "decision": None}),
             json.dumps({"tick": 1, "snapshot": later, "decision": {"actions": []}})]
    [(_, folded, _)] = list(policy_calls(lines))
    assert [t["name"] for t in folded["tenants"]] == ["t"], "folding keeps the earlier list"


def test_usable_demand_and_entitlements_follow_the_hosts_rule():
    capped = Entitlement("a", quota=6)
    assert capped.usable_demand(2, [2, 2], 64) == 6
    assert capped.usable_demand(0, [8, 2], 64) == 2, "an 8-GPU job can never run under a limit of 6"
    assert capped.usable_demand(4, [4, 4], 64) == 6
    assert capped.usable_demand(7, [], 64) == 7, "what it holds counts, even past its limit"
    assert Entitlement("b").usable_demand(0, [16, 4], 8) == 4, "a job larger than the cluster is left out"
    close = lambda a, b: all(abs(x - y) < 1e-9 for x, y in zip(a, b, strict=True))
    assert close(entitled(8, [3.0, 1.0], [10, 10]), [6.0, 2.0])
    assert close(entitled(8, [1.0, 1.0, 1.0], [1, 10, 10]), [1.0, 3.5, 3.5])
    assert close(entitled(8, [5.0, 1.0], [0, 10]), [0.0, 8.0])
