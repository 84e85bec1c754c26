// The job and node tables folded from the host's deltas, read through the views.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Decision, HISTORY_LIMIT, PolicyError, Runner, gib } from "../wasmsched.js";
import { TestWorld, job } from "../testing.js";

/** A policy that does nothing, to look at what the runner keeps. */
class Inspect {
  decide() {
    return new Decision();
  }
}

function world() {
  const w = new TestWorld();
  w.node("n0", 8000, gib(16));
  return w;
}

test("the table keeps history across ticks and marks new records", () => {
  const w = world();
  const a = w.addJob(job("a", "deepspeech2").metric("wer", "lower-is-better"));
  const r = new Runner(new Inspect());
  w.report(a, 1, [40]);
  r.decide(w.snapshot());
  w.advance(30);
  w.report(a, 2, [20]);
  w.setCpuUse(a, 1200);
  r.decide(w.snapshot());
  const j = r.view().job(a);
  assert.equal(j.history.length, 2);
  assert.deepEqual(j.newRecords.map((p) => p.epoch), [2]);
  assert.deepEqual(j.latest, { time: 30, epoch: 2, values: [20], value: 20 });
  assert.equal(j.epoch, 2);
  assert.equal(j.cpuUse, 1200);
  assert.equal(j.firstSeen, 0);
  assert.equal(j.direction, "lower-is-better");
  assert.equal(r.view().time, 30);
  assert.equal(r.view().interval, 30);
});

test("removed jobs leave and late jobs join in handle order", () => {
  const w = world();
  const a = w.addJob(job("a", "ncf"));
  const b = w.addJob(job("b", "ncf"));
  const r = new Runner(new Inspect());
  r.decide(w.snapshot());
  w.removeJob(a);
  const c = w.addJob(job("c", "bert").inference());
  r.decide(w.snapshot());
  const view = r.view();
  assert.deepEqual(view.jobs().map((j) => j.id), [b, c]);
  assert.equal(view.job(a), null);
  assert.equal(view.job(c).kind, "inference");
  assert.equal(view.job(c).firstSeen, 0);
});

test("a resync forgets every job it is not told about again", () => {
  const w = world();
  w.addJob(job("a", "ncf"));
  const r = new Runner(new Inspect());
  r.decide(w.snapshot());
  const fresh = new TestWorld();
  fresh.node("n0", 8000, gib(16));
  fresh.nextHandle = 7;
  const z = fresh.addJob(job("z", "cifar10"));
  r.decide(fresh.snapshot());
  assert.deepEqual(r.view().jobs().map((j) => j.name), ["z"]);
  assert.equal(r.view().job(z).id, 7);
});

test("added jobs out of handle order are sorted, and a handle sent twice is kept once", () => {
  const w = world();
  const r = new Runner(new Inspect());
  const raw = w.snapshot();
  const spec = (handle, name) => ({ ...job(name, "ncf").spec, handle });
  raw.added = [spec(5, "e"), spec(2, "b"), spec(5, "e-again")];
  raw.queue = { handle: [2, 5], reason: ["never-started", "never-started"], sinceMs: [0, 0], runMs: [0, 0], gpuMs: [0, 0] };
  r.decide(raw);
  const queued = r.view().queue();
  assert.deepEqual(queued.map((j) => [j.id, j.name]), [[2, "b"], [5, "e"]]);
  assert.equal(r.view().queueLength, 2);
  assert.equal(r.view().jobCount, 0);
});

test("limits of 0 read as unlimited, others as given", () => {
  const w = world();
  const a = w.addJob(job("a", "ncf"));
  const b = w.addJob(job("b", "ncf"));
  w.setCpuLimit(b, 1500);
  w.setMemoryLimit(b, gib(2));
  const r = new Runner(new Inspect());
  r.decide(w.snapshot());
  const view = r.view();
  assert.equal(view.job(a).cpuLimit, null);
  assert.equal(view.job(a).memoryLimit, null);
  assert.equal(view.job(b).cpuLimit, 1500);
  assert.equal(view.job(b).memoryLimit, gib(2));
});

test("64-bit numbers that arrive as BigInts are Numbers in the views", () => {
  const w = world();
  const a = w.addJob(job("a", "ncf"));
  w.setCpuLimit(a, 700);
  w.setMemoryUse(a, gib(3));
  w.advance(12.5);
  const raw = w.snapshot();
  const big = (list) => list.map(BigInt);
  raw.timeMs = BigInt(raw.timeMs);
  raw.intervalMs = BigInt(raw.intervalMs);
  raw.nodes = raw.nodes.map((n) => ({ ...n, cpuMillicores: BigInt(n.cpuMillicores), memoryBytes: BigInt(n.memoryBytes) }));
  raw.added = raw.added.map((s) => ({ ...s, arrivalMs: BigInt(s.arrivalMs) }));
  for (const k of ["cpuLimitMillicores", "memoryLimitBytes", "cpuUsedMillicores", "memoryUsedBytes", "runMs", "gpuMs"]) {
    raw.jobs[k] = big(raw.jobs[k]);
  }
  const r = new Runner(new Inspect());
  r.decide(raw);
  const view = r.view();
  const j = view.job(a);
  assert.equal(view.time, 12.5);
  assert.equal(j.cpuLimit, 700);
  assert.equal(j.memoryUse, gib(3));
  assert.equal(j.runTime, 12.5);
  assert.equal(typeof j.memoryUse, "number");
  assert.equal(view.nodes()[0].cpu, 8000);
  assert.equal(typeof view.nodes()[0].memory, "number");
});

test("history is capped at HISTORY_LIMIT records per job, oldest dropped first", () => {
  const w = world();
  const a = w.addJob(job("a", "cifar10").metric("accuracy"));
  const r = new Runner(new Inspect());
  for (let e = 1; e <= HISTORY_LIMIT + 10; e++) w.report(a, e, [e / 1000]);
  r.decide(w.snapshot());
  const j = r.view().job(a);
  assert.equal(HISTORY_LIMIT, 512);
  assert.equal(j.history.length, 512);
  assert.equal(j.history[0].epoch, 11);
  assert.equal(j.latest.epoch, 522);
  assert.equal(j.newRecords.length, 512);
  w.advance(30);
  w.report(a, 523, [0.6]);
  r.decide(w.snapshot());
  assert.equal(r.view().job(a).history.length, 512);
  assert.equal(r.view().job(a).history[0].epoch, 12);
  assert.deepEqual(r.view().job(a).newRecords.map((p) => p.epoch), [523]);
});

test("records carry several values, NaN where one is missing", () => {
  const w = world();
  const a = w.addJob(job("a", "bert").metric("accuracy").metric("loss", "lower-is-better"));
  const b = w.addJob(job("b", "bert"));
  const r = new Runner(new Inspect());
  w.report(a, 1, [0.5, NaN]);
  w.report(b, 1, []);
  w.report(a, 2, [0.6, 1.2]);
  r.decide(w.snapshot());
  assert.deepEqual(r.view().job(a).history.map((p) => p.values), [[0.5, NaN], [0.6, 1.2]]);
  assert.ok(Number.isNaN(r.view().job(b).latest.value));
});

test("ragged columns from a broken host are refused, not trusted, and the table is untouched", () => {
  const w = world();
  const a = w.addJob(job("a", "ncf"));
  w.setCpuUse(a, 300);
  const r = new Runner(new Inspect());
  r.decide(w.snapshot());
  w.setCpuUse(a, 900);
  const bad = w.snapshot();
  bad.jobs.cpuUsedMillicores = [];
  assert.throws(() => r.decide(bad), (e) => e instanceof PolicyError && e.kind === "failed" && /columns differ/.test(e.message));
  assert.equal(r.view().job(a).cpuUse, 300);
  const badProgress = w.snapshot();
  badProgress.progress = { job: [a], timeMs: [0], epoch: [1], valueCount: [2], values: [0.1] };
  assert.throws(() => r.decide(badProgress), /do not add up/);
  const badQueue = w.snapshot();
  badQueue.queue.reason.push("preempted");
  assert.throws(() => r.decide(badQueue), /queue columns differ/);
});

test("nodes are kept between ticks and GPU use is read from the columns", () => {
  const w = new TestWorld();
  w.node("cpu-only", 8000, gib(16));
  const g = w.nodeWithGpus("gpu", 16000, gib(64), [gib(32), gib(32)]);
  const r = new Runner(new Inspect());
  const first = w.snapshot();
  assert.notEqual(first.nodes, null);
  r.decide(first);
  w.setGpuUse(g, 1, 60, gib(3));
  const second = w.snapshot();
  assert.equal(second.nodes, null, "unchanged nodes are not resent");
  r.decide(second);
  const view = r.view();
  assert.equal(view.nodes().length, 2);
  const node = view.node(g);
  assert.deepEqual([node.name, node.cpu, node.memory], ["gpu", 16000, gib(64)]);
  assert.deepEqual(node.gpus()[1], { utilisationPercent: 60, memoryUsed: gib(3), memoryTotal: gib(32) });
  assert.equal(view.node(0).gpus().length, 0);
  assert.equal(view.node(2), null);

  const bad = w.snapshot();
  bad.gpus.memoryUsedBytes.pop();
  assert.throws(() => r.decide(bad), /do not match the nodes' 2 GPUs/);
});

test("GPUs held, holders and free GPUs; jobsOn; the queue and wait times", () => {
  const w = TestWorld.gpuCluster([4, 2]);
  const a = w.queueJob(job("a", "cifar10").gpus(2));
  w.start(a, 0, [0, 1]);
  const b = w.queueJob(job("b", "cifar10").gpus(1));
  w.start(b, 1, [1]);
  const c = w.queueJob(job("c", "bert").gpus(4));
  const r = new Runner(new Inspect());
  w.advance(10);
  r.decide(w.snapshot());
  const view = r.view();
  assert.deepEqual(view.job(a).gpus, [{ node: 0, index: 0 }, { node: 0, index: 1 }]);
  assert.deepEqual(view.gpuHolders(0), [1, 1, 0, 0]);
  assert.deepEqual(view.freeGpus(1), [0]);
  assert.deepEqual(view.jobsOn(1).map((j) => j.id), [b]);
  assert.deepEqual(view.queue().map((j) => j.id), [c]);
  const q = view.job(c);
  assert.equal(q.isQueued, true);
  assert.equal(q.waitReason, "never-started");
  assert.equal(q.wait(view.time), 10);
  assert.deepEqual(q.gpus, []);
  assert.equal(q.gpusAsked, 4);
  assert.equal(view.job(a).attainedService, 20, "two GPUs for 10 s");
  assert.equal(view.job(b).runTime, 10);
});
