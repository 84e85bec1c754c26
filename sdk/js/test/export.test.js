// The object exported as the component's `policy` interface: what the host calls.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Decision, PolicyError, exportPolicy, log, setLogSink, setCpu, toWitError } from "../wasmsched.js";
import { TestWorld, job } from "../testing.js";

class Counter {
  static config = { step: 1 };
  static places = true;
  constructor(config) {
    if (config.step <= 0) throw PolicyError.invalidConfig("`step` must be positive");
    this.step = config.step;
    this.calls = 0;
  }
  decide(s) {
    this.calls += this.step;
    if (s.time > 1000) throw new TypeError("boom");
    return new Decision(...s.jobs().map((j) => setCpu(j, 1000 + this.calls))).callAgainIn(5);
  }
  saveState() {
    return { calls: this.calls };
  }
  restoreState(saved) {
    if (typeof saved?.calls !== "number") throw PolicyError.invalidState("no `calls`");
    this.calls = saved.calls;
  }
}

function world() {
  const w = new TestWorld();
  w.node("n0", 8000, 2 ** 34);
  w.addJob(job("a", "ncf"));
  return w;
}

test("init says what the policy does, and decide answers in the contract's form", () => {
  const policy = exportPolicy(Counter);
  assert.deepEqual(policy.init("", null), { places: true });
  const w = world();
  const raw = policy.decide(w.snapshot());
  assert.deepEqual(raw, {
    actions: [{ job: 0, kind: { tag: "set-cpu", val: 1001 }, reason: "" }],
    nextCallMs: 5000,
    pending: [],
  });
});

test("a refused config is thrown as the contract's invalid-config, naming the key", () => {
  const policy = exportPolicy(Counter);
  assert.throws(() => policy.init('{"stpe": 2}', null), (e) => e.tag === "invalid-config" && /`stpe`/.test(e.val));
  assert.throws(() => policy.init('{"step": 0}', null), { tag: "invalid-config", val: "`step` must be positive" });
});

test("decide before init, and a bug in decide, are `failed`, not a trap", () => {
  const policy = exportPolicy(Counter);
  assert.throws(() => policy.decide(world().snapshot()), { tag: "failed", val: "decide called before init" });
  policy.init("{}", null);
  const w = world();
  w.advance(2000);
  assert.throws(() => policy.decide(w.snapshot()), (e) => e.tag === "failed" && e.val.startsWith("TypeError: boom"));
  const malformed = world().snapshot();
  malformed.jobs.node = [];
  assert.throws(() => policy.decide(malformed), (e) => e.tag === "failed" && /malformed snapshot/.test(e.val));
});

test("state saved by one instance is restored by the next; bad state is invalid-state", () => {
  const first = exportPolicy(Counter);
  first.init('{"step": 3}', null);
  first.decide(world().snapshot());
  const saved = first.saveState();
  assert.ok(saved instanceof Uint8Array);
  const second = exportPolicy(Counter);
  second.init("{}", saved);
  assert.equal(second.decide(world().snapshot()).actions[0].kind.val, 1004, "3 saved, then one step of 1");
  assert.equal(exportPolicy(Counter).saveState().length, 0, "nothing to save before init");
  assert.throws(() => exportPolicy(Counter).init("", new Uint8Array([0x7b])), (e) => e.tag === "invalid-state");
  assert.throws(() => exportPolicy(Counter).init("", Uint8Array.from(Buffer.from("{}"))), { tag: "invalid-state", val: "no `calls`" });
  assert.deepEqual(exportPolicy(Counter).init("", new Uint8Array(0)), { places: true }, "empty state is no state");
});

test("a failed init keeps the runner that was there", () => {
  const policy = exportPolicy(Counter);
  policy.init("{}", null);
  assert.throws(() => policy.init('{"x": 1}', null));
  assert.equal(policy.decide(world().snapshot()).actions.length, 1);
});

test("thrown values of every kind become a policy-error", () => {
  assert.deepEqual(toWitError(PolicyError.invalidState("old")), { tag: "invalid-state", val: "old" });
  assert.deepEqual(toWitError({ tag: "invalid-config", val: "k" }), { tag: "invalid-config", val: "k" });
  assert.deepEqual(toWitError("plain"), { tag: "failed", val: "plain" });
  assert.deepEqual(toWitError({ tag: "nonsense", val: 1 }), { tag: "failed", val: "[object Object]" });
  assert.match(toWitError(new RangeError("r")).val, /^RangeError: r/);
});

test("natively, log lines go to the sink", () => {
  const lines = [];
  const previous = setLogSink((level, message) => lines.push([level, message]));
  try {
    log.info("hello");
    log.warn(42);
  } finally {
    setLogSink(previous);
  }
  assert.deepEqual(lines, [["info", "hello"], ["warn", "42"]]);
});
