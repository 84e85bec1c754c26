// Contract 0.3.0 through the SDK: GPU types, nodes that take no work, elastic jobs (their
// scaling and batch size), the resize action and why queued jobs wait; the rules' checks of
// them as sdk/src/sched.rs tests them.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Decision, migrate, place, placeOn, resize } from "../wasmsched.js";
import { check, verdicts } from "../rules.js";
import { Harness, TestWorld, job, seen, wireProblems } from "../testing.js";


test("a node shows its GPU type and whether it takes work", () => {
  const w = TestWorld.gpuCluster([4, 4]);
  w.setGpuType(1, "a100");
  w.setTakesWork(0, false);
  const r = seen(w);
  let s = r.view();
  assert.deepEqual([s.node(0).gpuType, s.node(1).gpuType], ["", "a100"]);
  assert.deepEqual([s.node(0).takesWork, s.node(1).takesWork], [false, true]);
  assert.deepEqual(s.nodesDown, [0]);
  w.setTakesWork(0, true);
  w.setGpuType(0, "t4");
  r.decide(w.snapshot());
  s = r.view();
  assert.ok(s.node(0).takesWork);
  assert.deepEqual(s.nodesDown, []);
  assert.equal(s.node(0).gpuType, "t4", "a new GPU type sends the nodes again");
});

test("a rigid job lists its own GPU count and an elastic one its counts and batch sizes", () => {
  const w = TestWorld.gpuCluster([4, 4]);
  const rigid = w.queueJob(job("r", "cifar10").gpus(2));
  const e = w.queueJob(job("e", "cifar10").gpus(1).elastic([4, 2], [128, 1024]));
  w.start(e, 0, [0]);
  const s = seen(w).view();
  const r = s.job(rigid);
  const j = s.job(e);
  assert.deepEqual(r.scaling, { gpuCounts: [2], batchSizeMin: 0, batchSizeMax: 0 });
  assert.equal(r.isElastic, false);
  assert.equal(r.batchSize, 0);
  assert.deepEqual(j.scaling, { gpuCounts: [1, 2, 4], batchSizeMin: 128, batchSizeMax: 1024 }, "ascending, with its own count");
  assert.equal(j.isElastic, true);
  assert.equal(j.batchSize, 128, "it starts at the smallest batch size");
});

test("an elastic job is resized within its counts and batch sizes", () => {
  const w = TestWorld.gpuCluster([4, 4]);
  const e = w.queueJob(job("e", "cifar10").gpus(1).elastic([1, 2, 4], [128, 1024]));
  w.start(e, 0, [0]);
  const r = seen(w);
  const s = r.view();
  const grow = new Decision(resize(e, [[0, [0, 1]], [1, [0, 1]]], 512));
  assert.equal(check(s, grow), null);
  assert.equal(
    check(s, new Decision(resize(e, [[0, [0, 1, 2]]]))),
    "action 0: job 0 runs on [1, 2, 4] GPUs (its scaling); the placement gives 3",
  );
  assert.equal(
    check(s, new Decision(resize(e, [[0, [0, 1]]], 4096))),
    "action 0: job 0 accepts batch sizes 128–1024; the resize asks for 4096",
  );
  w.apply(grow);
  r.decide(w.snapshot());
  let j = r.view().job(e);
  assert.deepEqual(j.gpus.map((g) => [g.node, g.index]), [[0, 0], [0, 1], [1, 0], [1, 1]]);
  assert.equal(j.batchSize, 512);
  w.apply(new Decision(resize(e, [[1, [2, 3]]])));
  r.decide(w.snapshot());
  j = r.view().job(e);
  assert.deepEqual([j.node, j.gpus.length, j.batchSize], [1, 2, 512], "no batch size keeps it");
});

test("a resize is refused a batch size for a job without one, an empty entry and a down node", () => {
  const w = TestWorld.gpuCluster([4, 4, 4]);
  const rigid = w.queueJob(job("r", "cifar10").gpus(2));
  w.start(rigid, 0, [0, 1]);
  const e = w.queueJob(job("e", "cifar10").gpus(2).elastic([2, 4], [64, 256]));
  w.start(e, 1, [0, 1]);
  w.setTakesWork(2, false);
  const s = seen(w).view();
  const got = verdicts(
    s,
    new Decision(
      resize(rigid, [[0, [0, 1]]], 32),
      resize(e, [[0, [2, 3]], [1, []]]),
      resize(e, [[2, [0, 1]]]),
      resize(e, [[0, [0, 1]]]),
      resize(e, [[1, [0, 1, 2, 3]]], 256),
      resize(e, [[1, [0, 1]]]),
    ),
  );
  assert.deepEqual(
    got.map((p) => p?.kind ?? null),
    ["BatchOutOfRange", "EmptyEntry", "NodeDown", "GpuHeld", null, "AlreadyMoved"],
  );
  assert.equal(got[0]?.message, "job 0 has no batch size the host sets; the resize asks for 32");
  assert.equal(got[1]?.message, "the resize names node n1 with no GPU; leave it out");
  assert.equal(got[2]?.message, "node n2 cannot take work now (NotReady or cordoned)");
});

test("a resize gives up its own GPUs to a later placement", () => {
  const w = TestWorld.gpuCluster([2]);
  const e = w.queueJob(job("e", "cifar10").gpus(2).elastic([1, 2], [0, 0]));
  w.start(e, 0, [0, 1]);
  const q = w.queueJob(job("q", "cifar10").gpus(1));
  const early = w.queueJob(job("early", "cifar10").gpus(1));
  const s = seen(w).view();
  const got = verdicts(s, new Decision(place(early, 0, [1]), resize(e, [[0, [0]]]), place(q, 0, [1])));
  assert.deepEqual(got.map((p) => p?.kind ?? null), ["GpuHeld", null, null]);
});

test("nothing is placed or migrated onto a node that takes no work", () => {
  const w = TestWorld.gpuCluster([4, 4]);
  w.setTakesWork(1, false);
  const a = w.queueJob(job("a", "cifar10").gpus(2));
  const b = w.addJob(job("b", "cifar10"), 0);
  const s = seen(w).view();
  const down = "action 0: node n1 cannot take work now (NotReady or cordoned)";
  assert.equal(check(s, new Decision(place(a, 1, [0, 1]))), down);
  assert.equal(check(s, new Decision(migrate(b, 1))), down);
  assert.equal(check(s, new Decision(place(a, 0, [0, 1]))), null);
});

test("an elastic job is placed on any of its counts, spread over nodes", () => {
  const w = TestWorld.gpuCluster([4, 4]);
  const e = w.queueJob(job("e", "cifar10").gpus(2).elastic([2, 4, 8], [32, 512]));
  const s = seen(w).view();
  assert.equal(check(s, new Decision(placeOn(e, [[0, [0, 1, 2]], [1, [0]]]))), null);
  assert.equal(
    check(s, new Decision(place(e, 0, [0, 1, 2]))),
    "action 0: job 0 runs on [2, 4, 8] GPUs (its scaling); the placement gives 3",
  );
});

test("a resize naming more node entries than nodes is refused whole", () => {
  const w = TestWorld.gpuCluster([4]);
  const e = w.queueJob(job("e", "cifar10").gpus(1).elastic([1, 2], [0, 0]));
  w.start(e, 0, [0]);
  const s = seen(w).view();
  assert.equal(
    check(s, new Decision(resize(e, [[0, [1]], [0, [2]]]))),
    "action 0 places on 2 node entries; the cluster has 1 nodes",
  );
});

test("a resize crosses as the contract's variant, and its numbers are checked where it is made", () => {
  const raw = new Decision(resize(3, [[0, [0, 1]], [{ id: 1 }, [2]]], 256), resize(4, [[2, [3]]])).toWit();
  assert.deepEqual(raw.actions.map((a) => a.kind), [
    { tag: "resize", val: { placement: { nodes: [{ node: 0, gpus: [0, 1] }, { node: 1, gpus: [2] }], share: false }, batchSize: 256 } },
    { tag: "resize", val: { placement: { nodes: [{ node: 2, gpus: [3] }], share: false }, batchSize: null } },
  ]);
  assert.deepEqual(wireProblems(raw), []);
  assert.throws(() => resize(3, [[0, [0]]], 2 ** 32), /batch size/);
  assert.throws(() => resize(3, [[0, [-1]]]), /GPU index/);
});

class Waits {
  /** @param {import("../wasmsched.js").Snapshot} s */
  decide(s) {
    const d = new Decision();
    const free = s.nodes().reduce((n, node) => n + s.freeGpus(node).length, 0);
    for (const j of s.queue()) d.pending(j, `${j.gpusAsked} GPUs asked, ${free} free`);
    return d;
  }
}

test("a decision says why queued jobs wait, and the reasons cross in order", () => {
  const w = TestWorld.gpuCluster([2]);
  const a = w.queueJob(job("a", "cifar10").gpus(4));
  const b = w.queueJob(job("b", "cifar10").gpus(3));
  const d = new Harness(new Waits(), w).tick(1);
  assert.ok(d.isEmpty(), "a reason is not an action");
  assert.deepEqual(d.toWit().pending, [
    { job: a, reason: "4 GPUs asked, 2 free" },
    { job: b, reason: "3 GPUs asked, 2 free" },
  ]);
  assert.throws(() => new Decision().pending(-1, "no such job"), /job/);
  assert.deepEqual(wireProblems({ actions: [], nextCallMs: null, pending: [{ job: 1, reason: 7 }] }), [
    "pending[0].reason is not a string",
  ]);
});
