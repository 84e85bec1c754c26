// The native harness: a TestWorld sends what the host sends, and puts decisions into force.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Decision, PolicyError, gib, liftCpu, place, preempt, setCpu, setMemory, stop } from "../wasmsched.js";
import { Harness, TestWorld, job } from "../testing.js";

test("the first snapshot is a resync with every node and job; later ones carry only changes", () => {
  const w = new TestWorld();
  w.node("n0", 4000, gib(8));
  const a = w.addJob(job("a", "cifar10").metric("accuracy").tiers(0.8, 0.9).label("team", "t0"));
  w.advance(30);
  const first = w.snapshot();
  assert.equal(first.resync, true);
  assert.equal(first.intervalMs, 0);
  assert.equal(first.nodes.length, 1);
  assert.deepEqual(first.added.map((s) => s.handle), [a]);
  assert.deepEqual(first.added[0].tiers, { deliverable: 0.8, final: 0.9 });
  assert.deepEqual(first.added[0].labels, [["team", "t0"]]);
  w.advance(30);
  const b = w.addJob(job("b", "ncf"));
  w.removeJob(a);
  const second = w.snapshot();
  assert.equal(second.resync, false);
  assert.equal(second.intervalMs, 30000);
  assert.equal(second.nodes, null);
  assert.deepEqual(second.added.map((s) => s.handle), [b]);
  assert.deepEqual(second.removed, [a]);
  assert.deepEqual(second.jobs.handle, [b]);
  w.node("n1", 4000, gib(8));
  assert.equal(w.snapshot().nodes.length, 2, "a node added later is sent");
});

test("the harness puts limits, placements, preemptions and stops into force", () => {
  class Script {
    constructor() {
      this.steps = [];
    }
    decide(s) {
      return this.steps.shift()?.(s) ?? new Decision();
    }
  }
  const w = TestWorld.gpuCluster([2]);
  const a = w.addJob(job("a", "ncf"));
  const q = w.queueJob(job("q", "cifar10").gpus(1));
  const policy = new Script();
  const h = new Harness(policy, w);
  policy.steps.push(() => new Decision(setCpu(a, 500), setMemory(a, gib(1)), place(q, 0, [1])));
  h.tick(30);
  assert.equal(h.world.snapshot().jobs.cpuLimitMillicores[0], 500);
  h.tick(30);
  assert.equal(h.view().job(a).cpuLimit, 500);
  assert.equal(h.view().job(a).memoryLimit, gib(1));
  assert.deepEqual(h.view().job(q).gpus, [{ node: 0, index: 1 }]);
  policy.steps.push(() => new Decision(preempt(q), stop(a)));
  h.tick(30);
  h.tick(30);
  assert.equal(h.view().job(a), null);
  assert.equal(h.view().job(q).waitReason, "preempted");
  assert.equal(h.view().job(q).runTime, 60, "it ran two ticks, and keeps that while queued");
});

test("a decision that could not cross to the host fails the tick", () => {
  const w = new TestWorld();
  w.node("n0", 4000, gib(8));
  w.addJob(job("a", "ncf"));
  const sneaky = { decide: (s) => { const d = new Decision(liftCpu(s.jobs()[0])); d.actions[0].kind = { tag: "set-cpu", val: 5n }; return d; } };
  assert.throws(() => new Harness(sneaky, w).tick(30), /would not cross to the host: actions\[0\] set-cpu is bigint 5/);
});

test("fromConfig builds the policy as init does", () => {
  class Tuned {
    static config = { share: 0.5 };
    constructor(c) {
      this.share = c.share;
    }
    decide() {}
  }
  assert.equal(Harness.fromConfig(Tuned, '{"share": 0.7}').policy.share, 0.7);
  assert.throws(() => Harness.fromConfig(Tuned, '{"shares": 1}'), (e) => e instanceof PolicyError && e.kind === "invalid-config");
});
