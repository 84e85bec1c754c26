// fair-share, tested natively through the SDK's harness: `node --test policies/js`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { gib } from "../../../sdk/js/wasmsched.js";
import { Harness, TestWorld, job } from "../../../sdk/js/testing.js";
import { FairShare, policy } from "./policy.js";

test("lifts a CPU limit it finds and then leaves the job alone", () => {
  const world = new TestWorld();
  world.node("n0", 4000, gib(8));
  const a = world.addJob(job("a", "cifar10"));
  const b = world.addJob(job("b", "ncf"));
  world.setCpuLimit(a, 500);
  const h = Harness.fromConfig(FairShare, "", world);
  const d = h.tick(30);
  assert.equal(d.actions.length, 1);
  assert.equal(d.cpuLimitFor(a), null, "lifted");
  assert.equal(d.cpuLimitFor(b), undefined, "not touched");
  assert.equal(d.actions[0].reason, "fair-share sets no CPU limit");
  assert.ok(h.tick(30).isEmpty());
});

test("lifts CPU then memory, job by job in handle order", () => {
  const world = new TestWorld();
  world.node("n0", 4000, gib(8));
  const a = world.addJob(job("a", "cifar10"));
  const b = world.addJob(job("b", "ncf"));
  world.setMemoryLimit(a, gib(2));
  world.setCpuLimit(b, 700);
  world.setMemoryLimit(b, gib(1));
  const d = Harness.fromConfig(FairShare, "{}", world).tick(30);
  assert.deepEqual(
    d.actions.map((x) => [x.job, x.kind, x.reason]),
    [
      [a, { tag: "set-memory", val: null }, "fair-share sets no memory limit"],
      [b, { tag: "set-cpu", val: null }, "fair-share sets no CPU limit"],
      [b, { tag: "set-memory", val: null }, "fair-share sets no memory limit"],
    ],
  );
});

test("refuses a config with keys it does not know", () => {
  assert.throws(
    () => Harness.fromConfig(FairShare, '{"alpha":1}', new TestWorld()),
    (e) => e.kind === "invalid-config" && e.message.includes("alpha"),
  );
  // And through the component's export, as the host sees it.
  assert.throws(() => policy.init('{"alpha":1}', null), (e) => e.tag === "invalid-config" && e.val.includes("alpha"));
  assert.deepEqual(policy.init("", null), { places: false });
});
