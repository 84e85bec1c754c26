// {{name}}'s tests, natively through the SDK's harness: `npm test`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { gib } from "./sdk/wasmsched.js";
import { Harness, TestWorld, job } from "./sdk/testing.js";
import { {{type}} } from "./policy.js";

test("two jobs share their node equally and are then left alone", () => {
  const world = new TestWorld();
  world.node("n0", 8000, gib(16));
  const a = world.addJob(job("a", "cifar10"));
  const b = world.addJob(job("b", "ncf"));
  const h = Harness.fromConfig({{type}}, "", world);
  const d = h.tick(30);
  assert.equal(d.cpuLimitFor(a), 4000);
  assert.equal(d.cpuLimitFor(b), 4000);
  // The harness puts the limits into force, as the host would: nothing more to do.
  assert.ok(h.tick(30).isEmpty());
});

test("a config key it does not know is refused by name", () => {
  assert.throws(() => Harness.fromConfig({{type}}, '{"min-milicores": 5}'), /min-milicores/);
});
