// Tenants through the SDK: whose a job is, what each tenant is entitled to (a list that crosses
// only when it changes, as the nodes do), and the limits the host holds them to, as
// sdk/src/view/tenant.rs, sdk/src/testing.rs and rules/src/tenants.rs test them.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Decision, Ledger as Reexported, Runner, placeOn, preempt, resize } from "../wasmsched.js";
import { Ledger, OverLimit, check, tenantLimit, usableDemand, verdicts } from "../rules.js";
import { Inspect, TestWorld, job, seen, tenant } from "../testing.js";


/** @param {string} name @param {number | null} [quota] @param {number | null} [borrowingLimit] @param {string | null} [cohort] */
const entitlement = (name, quota = null, borrowingLimit = null, cohort = null) => ({ name, quota, borrowingLimit, cohort });

test("a job names its tenant and the view shows what each tenant is entitled to", () => {
  const w = TestWorld.gpuCluster([4]);
  w.declare(tenant("research").weight(2).quota(4).borrowingLimit(2).cohort("lab"));
  w.declare(tenant("prod").quota(8));
  const a = w.addJob(job("a", "cifar10").tenant("research"));
  const b = w.addJob(job("b", "cifar10"));
  const c = w.queueJob(job("c", "bert").tenant("adhoc"));
  const s = seen(w).view();
  assert.deepEqual([s.job(a).tenant, s.job(b).tenant, s.job(c).tenant], ["research", "default", "adhoc"]);
  assert.deepEqual(s.tenants().map((t) => t.name), ["research", "prod", "default", "adhoc"], "declared ones first");
  assert.deepEqual(s.tenants().map((t) => t.index), [0, 1, 2, 3]);
  const view = (/** @type {any} */ t) => [t.weight, t.quota, t.borrowingLimit, t.cohort, t.limit()];
  assert.deepEqual(view(s.tenant("research")), [2, 4, 2, "lab", 6]);
  assert.deepEqual(view(s.tenant("prod")), [1, 8, null, null, 8], "no cohort: its quota");
  assert.deepEqual(view(s.tenant("default")), [1, null, null, null, null]);
  assert.equal(s.tenant("nobody"), null);
  assert.equal(s.tenantIndex("adhoc"), 3);
  assert.deepEqual(s.tenant("research").entitlement(), entitlement("research", 4, 2, "lab"));
});

test("the tenants cross when they change and are kept otherwise", () => {
  const w = TestWorld.gpuCluster([2]);
  w.declare(tenant("a").quota(1));
  const r = new Runner(new Inspect());
  const first = w.snapshot();
  assert.ok(first.resync);
  assert.deepEqual(first.tenants.map((t) => t.name), ["a"], "a resync carries them");
  r.decide(first);
  const second = w.snapshot();
  assert.equal(second.tenants, null, "unchanged: not sent");
  r.decide(second);
  assert.deepEqual(r.view().tenants().map((t) => t.name), ["a"], "the last list is kept");
  w.queueJob(job("x", "cifar10").tenant("b"));
  const third = w.snapshot();
  assert.deepEqual(third.tenants.map((t) => t.name), ["a", "b"], "a job naming a new tenant sends the list again");
  r.decide(third);
  assert.equal(r.view().tenant("b").quota, null);
  w.queueJob(job("y", "cifar10").tenant("b"));
  assert.equal(w.snapshot().tenants, null, "a tenant already known changes nothing");
  w.declare(tenant("b").quota(3));
  assert.deepEqual(w.snapshot().tenants.map((t) => [t.name, t.quotaGpus]), [["a", 1], ["b", 3]], "declared, in order");
  w.declare(tenant("a").quota(2).cohort("lab"));
  const fifth = w.snapshot();
  assert.deepEqual(fifth.tenants.map((t) => [t.name, t.quotaGpus, t.cohort]), [["a", 2, "lab"], ["b", 3, ""]], "replaced");
  r.decide(fifth);
  assert.equal(r.view().tenant("a").cohort, "lab");
});

test("a job naming no tenant is the default one's, and a delta from before tenants reads so", () => {
  const w = TestWorld.gpuCluster([1]);
  const a = w.addJob(job("a", "cifar10").tenant(" "));
  const s = seen(w).view();
  assert.equal(s.job(a).tenant, "default");
  assert.deepEqual(s.tenants().map((t) => t.name), ["default"]);
  const old = new TestWorld();
  old.node("n0", 1000, 1);
  const b = old.addJob(job("b", "m"));
  const raw = old.snapshot();
  delete raw.tenants;
  delete raw.added[0].tenant;
  const r = new Runner(new Inspect());
  r.decide(raw);
  assert.equal(r.view().job(b).tenant, "default");
  assert.deepEqual(r.view().tenants(), []);
});

test("a malformed snapshot leaves the tenants as they were", () => {
  const w = TestWorld.gpuCluster([1]);
  w.declare(tenant("a"));
  const r = seen(w);
  w.declare(tenant("b"));
  const bad = w.snapshot();
  bad.gpus.utilisationPercent.push(0);
  assert.throws(() => r.decide(bad), /malformed/);
  assert.deepEqual(r.view().tenants().map((t) => t.name), ["a"]);
});

test("a tenant without a cohort holds its quota at most", () => {
  const l = new Ledger([entitlement("a", 4, 8), entitlement("free")]);
  l.hold(0, 3);
  assert.equal(l.room(0), 1);
  assert.equal(l.held(0), 3);
  l.check(0, 1);
  assert.throws(() => l.check(0, 2), {
    name: "OverLimit",
    message: "tenant a holds 3 GPUs of its limit of 4 (its quota); 2 more would pass it",
  });
  l.hold(1, 1000);
  assert.equal(l.room(1), null, "no quota, no limit");
  l.check(1, 1000);
  assert.equal(tenantLimit(entitlement("a", 4, 8)), 4);
});

test("a cohort lends idle quota up to each borrowing limit", () => {
  const l = new Ledger([entitlement("a", 4, 2, "lab"), entitlement("b", 4, null, "lab"), entitlement("c", 0, null, "lab")]);
  assert.equal(l.room(0), 6, "quota 4 + borrowing 2");
  assert.equal(l.room(1), 8, "the whole cohort");
  assert.equal(l.room(2), 8, "a pure borrower");
  l.hold(0, 6);
  assert.throws(() => l.check(0, 1), /quota 4 \+ borrowing 2/);
  assert.equal(l.room(1), 2, "a lent two of b's four");
  let over;
  try {
    l.check(2, 3);
  } catch (e) {
    over = e;
  }
  assert.ok(over instanceof OverLimit);
  assert.equal(over.kind, "Cohort");
  assert.deepEqual([over.fields.holds, over.fields.quotas], [6, 8]);
  assert.equal(
    over.message,
    "tenant c's cohort lab holds 6 GPUs of its members' 8 of quota; 3 more would pass it (nothing idle to borrow)",
  );
  l.release(0, 6);
  assert.equal(l.room(2), 8);
});

test("a member without a quota neither lends nor counts against its cohort", () => {
  const l = new Ledger([entitlement("a", 2, null, "lab"), entitlement("free", null, null, "lab")]);
  l.hold(1, 50);
  assert.deepEqual([l.room(0), l.room(1)], [2, null]);
  l.check(1, 100);
});

test("unknown tenants and zero asks pass", () => {
  const l = new Ledger([entitlement("a", 0)]);
  l.check(7, 100);
  l.check(0, 0);
  l.hold(7, 3);
  l.release(0, 3);
  assert.equal(l.held(0), 0);
  assert.equal(l.room(7), null);
  assert.ok(l.limitsAnything());
  assert.ok(!new Ledger([entitlement("x", null, null, "c")]).limitsAnything());
  assert.equal(Reexported, Ledger, "wasmsched.js re-exports the rules' Ledger");
});

test("the snapshot's ledger counts what each tenant's running jobs hold", () => {
  const w = TestWorld.gpuCluster([4, 4]);
  w.declare(tenant("a").quota(2));
  w.declare(tenant("b").quota(2).borrowingLimit(1).cohort("lab"));
  w.declare(tenant("c").quota(2).cohort("lab"));
  const a = w.queueJob(job("a", "cifar10").gpus(1).tenant("a"));
  w.start(a, 0, [0]);
  const b = w.queueJob(job("b", "cifar10").gpus(2).tenant("b"));
  w.start(b, 0, [1, 2]);
  w.queueJob(job("waits", "cifar10").gpus(4).tenant("c"));
  const d = w.queueJob(job("d", "cifar10").gpus(4));
  w.start(d, 1, [0, 1, 2, 3]);
  const s = seen(w).view();
  const ledger = s.ledger();
  assert.deepEqual(s.tenants().map((t) => ledger.held(t.index)), [1, 2, 0, 4], "a queued job holds nothing");
  assert.deepEqual(["a", "b", "c", "default", "nobody"].map((t) => s.room(t)), [1, 1, 2, null, null]);
});

test("without any quota nothing is limited or counted", () => {
  const w = TestWorld.gpuCluster([2]);
  const a = w.queueJob(job("a", "cifar10").gpus(2));
  w.start(a, 0, [0, 1]);
  const s = seen(w).view();
  assert.equal(s.room("default"), null);
  assert.equal(s.ledger().held(0), 0);
});

/** The conformance vectors' tenant cluster (tests/tests/conformance/checks.rs). */
function tenantWorld() {
  const w = TestWorld.gpuCluster([4, 4]);
  w.declare(tenant("a").quota(2));
  w.declare(tenant("b").quota(2).borrowingLimit(1).cohort("lab"));
  w.declare(tenant("c").quota(2).cohort("lab"));
  const jobs = [
    w.queueJob(job("j0", "m").gpus(1).tenant("a")),
    w.queueJob(job("j1", "m").gpus(2).tenant("a")),
    w.queueJob(job("j2", "m").gpus(1).tenant("b")),
    w.queueJob(job("j3", "m").gpus(3).tenant("b")),
    w.queueJob(job("j4", "m").gpus(2).tenant("c")),
    w.queueJob(job("j5", "m").gpus(2).tenant("c")),
    w.queueJob(job("j6", "m").gpus(4)),
  ];
  w.start(jobs[0], 0, [0]);
  w.start(jobs[2], 0, [1]);
  return { w, j: jobs };
}

/** @param {any} view @param {Decision} d */
const outcomes = (view, d) => verdicts(view, d).map((p) => (p === null ? null : p.message));

test("the rules refuse a placement past its tenant's quota until a preemption makes room", () => {
  const { w, j } = tenantWorld();
  const view = seen(w).view();
  const d = new Decision(placeOn(j[1], [[1, [0, 1]]]), preempt(j[0]), placeOn(j[1], [[1, [0, 1]]]));
  assert.deepEqual(outcomes(view, d), ["tenant a holds 1 GPUs of its limit of 2 (its quota); 2 more would pass it", null, null]);
  assert.equal(verdicts(view, d)[0]?.kind, "OverTenantLimit");
  assert.match(check(view, d), /^action 0: tenant a holds 1 GPUs/);
});

test("the rules let a tenant borrow within its cohort up to its borrowing limit and the idle quota", () => {
  const { w, j } = tenantWorld();
  const view = seen(w).view();
  const d = new Decision(
    placeOn(j[3], [[1, [0, 1, 2]]]),
    placeOn(j[4], [[0, [2, 3]]]),
    placeOn(j[5], [[1, [0, 1]]]),
    placeOn(j[6], [[1, [0, 1, 2, 3]]], true),
  );
  assert.deepEqual(outcomes(view, d), [
    "tenant b holds 1 GPUs of its limit of 3 (quota 2 + borrowing 1); 3 more would pass it",
    null,
    "tenant c's cohort lab holds 3 GPUs of its members' 4 of quota; 2 more would pass it (nothing idle to borrow)",
    null,
  ]);
});

test("a resize counts only the GPUs it adds", () => {
  const w = TestWorld.gpuCluster([4]);
  w.declare(tenant("a").quota(3));
  const e = w.queueJob(job("e", "cifar10").gpus(2).elastic([1, 2, 4], [0, 0]).tenant("a"));
  w.start(e, 0, [0, 1]);
  const view = seen(w).view();
  assert.equal(check(view, new Decision(resize(e, [[0, [0]]]))), null);
  assert.equal(
    check(view, new Decision(resize(e, [[0, [0, 1, 2, 3]]]))),
    "action 0: tenant a holds 2 GPUs of its limit of 3 (its quota); 2 more would pass it",
  );
});

test("usable demand leaves out what the tenant could never hold, as the host's rule does", () => {
  const capped = { name: "a", quota: 6, borrowingLimit: null, cohort: null };
  assert.equal(usableDemand(capped, 2, [2, 2], 64), 6);
  assert.equal(usableDemand(capped, 0, [8, 2], 64), 2, "an 8-GPU job can never run under a limit of 6");
  assert.equal(usableDemand(capped, 4, [4, 4], 64), 6);
  assert.equal(usableDemand(capped, 7, [], 64), 7, "what it holds counts, even past its limit");
  const free = { name: "b", quota: null, borrowingLimit: null, cohort: null };
  assert.equal(usableDemand(free, 0, [16, 4], 8), 4, "a job larger than the cluster is left out");
});
