// Actions and decisions, and the form they cross in.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Action, Decision, liftCpu, migrate, place, placeOn, setCpu, setGpuShare, setMemory, stop } from "../wasmsched.js";
import { wireProblems } from "../testing.js";

test("builders carry units and reasons, and take a job or its id", () => {
  const a = setCpu(3, 1500).because("growing");
  assert.equal(a.job, 3);
  assert.equal(a.cpuLimit, 1500);
  assert.equal(a.reason, "growing");
  assert.equal(stop(1).cpuLimit, undefined);
  assert.equal(liftCpu({ id: 4 }).job, 4);
  assert.equal(liftCpu(4).cpuLimit, null);
  assert.equal(Action.setCpu, setCpu);
});

test("next call crosses in whole milliseconds, as a Number", () => {
  const raw = new Decision(liftCpu(1)).callAgainIn(2.5).toWit();
  assert.equal(raw.nextCallMs, 2500);
  assert.equal(raw.actions.length, 1);
  assert.equal(new Decision().toWit().nextCallMs, null);
  assert.equal(new Decision().callAgainIn(-3).toWit().nextCallMs, 0);
  assert.equal(new Decision().callAgainIn(NaN).toWit().nextCallMs, 0);
  assert.equal(new Decision().callAgainIn(0.0305).toWit().nextCallMs, 31);
});

test("every u64 crosses as an integer Number, never a BigInt (a BigInt traps the component)", () => {
  const d = new Decision(
    setCpu(1, 1499.6),
    setMemory(1, 2n ** 33n),
    liftCpu(2),
    migrate(2, 1),
    setGpuShare(3, 0, 40),
    place(4, 1, [0, 2]),
    placeOn(5, [[0, [1]], [{ id: 1 }, [3]]], true),
    stop(6),
  ).callAgainIn(30);
  const raw = d.toWit();
  assert.deepEqual(wireProblems(raw), []);
  assert.deepEqual(raw.actions[0], { job: 1, kind: { tag: "set-cpu", val: 1500 }, reason: "" });
  assert.deepEqual(raw.actions[1].kind, { tag: "set-memory", val: 2 ** 33 });
  assert.deepEqual(raw.actions[2].kind, { tag: "set-cpu", val: null });
  assert.deepEqual(raw.actions[4].kind, { tag: "set-gpu-share", val: { gpu: 0, percent: 40 } });
  assert.deepEqual(raw.actions[5].kind, { tag: "place", val: { nodes: [{ node: 1, gpus: [0, 2] }], share: false } });
  assert.deepEqual(raw.actions[6].kind.val, { nodes: [{ node: 0, gpus: [1] }, { node: 1, gpus: [3] }], share: true });
  assert.deepEqual(raw.actions[7].kind, { tag: "stop" });
  assert.deepEqual(wireProblems({ actions: [{ job: 1, kind: { tag: "set-cpu", val: 5n }, reason: "" }], nextCallMs: 1n }).length, 2);
});

test("builders refuse what would trap the component, at the mistake", () => {
  assert.throws(() => setCpu(1, NaN), RangeError);
  assert.throws(() => setCpu(1, -1), /CPU limit must be a finite number >= 0/);
  assert.throws(() => setMemory(1, Infinity), RangeError);
  assert.throws(() => setGpuShare(1, 0, 101), /GPU share/);
  assert.throws(() => migrate(1, -2), /node must be an integer/);
  assert.throws(() => stop(1.5), /job must be an integer/);
  assert.throws(() => new Decision().push({ job: 1 }), TypeError);
});

test("the last CPU or memory action on a job wins", () => {
  const d = new Decision(setCpu(1, 100), stop(1), liftCpu(1), setMemory(2, 10));
  assert.equal(d.cpuLimitFor(1), null);
  assert.equal(d.cpuLimitFor(2), undefined);
  assert.equal(d.memoryLimitFor(2), 10);
  assert.equal(d.isEmpty(), false);
  assert.equal(new Decision().isEmpty(), true);
});

test("decide may return a Decision, an array of Actions, or nothing", () => {
  assert.equal(Decision.from(undefined).isEmpty(), true);
  assert.deepEqual(Decision.from([stop(1)]).actions.map((a) => a.job), [1]);
  const d = new Decision();
  assert.equal(Decision.from(d), d);
  assert.throws(() => Decision.from({ actions: [] }), TypeError);
});
