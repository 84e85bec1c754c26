// Config parsing and saved state.
import assert from "node:assert/strict";
import { test } from "node:test";

import { PolicyError, decodeState, encodeState, parseConfig } from "../wasmsched.js";

const refused = (pattern) => (e) => e instanceof PolicyError && e.kind === "invalid-config" && pattern.test(e.message);

test("an empty config is the defaults", () => {
  assert.deepEqual(parseConfig("", { window_s: 30, floor: 0.1 }), { window_s: 30, floor: 0.1 });
  assert.deepEqual(parseConfig("  \n", {}), {});
  assert.deepEqual(parseConfig(null, { a: 1 }), { a: 1 });
});

test("given keys override the defaults", () => {
  assert.deepEqual(parseConfig('{"floor": 0.25}', { window_s: 30, floor: 0.1 }), { window_s: 30, floor: 0.25 });
  assert.deepEqual(parseConfig('{"nodes": ["a"]}', { nodes: [] }), { nodes: ["a"] });
  assert.deepEqual(parseConfig('{"anything": {"x": 1}}', { anything: null }), { anything: { x: 1 } });
});

test("an unknown key is refused by name", () => {
  assert.throws(() => parseConfig('{"alpha": 1}', {}), refused(/unknown key `alpha`: this policy takes no config/));
  assert.throws(
    () => parseConfig('{"window_s": 10, "widnow": 1}', { window_s: 30, floor: 0.1 }),
    refused(/unknown key `widnow`: expected one of `window_s`, `floor`/),
  );
  assert.throws(() => parseConfig('{"toString": 1}', {}), refused(/`toString`/));
});

test("a value of the wrong type, a non-table and bad JSON are refused", () => {
  assert.throws(() => parseConfig('{"window_s": "30s"}', { window_s: 30 }), refused(/`window_s` must be a number, not string "30s"/));
  assert.throws(() => parseConfig('{"on": 1}', { on: true }), refused(/`on` must be a boolean/));
  assert.throws(() => parseConfig("[1]", {}), refused(/must be a table, not array/));
  assert.throws(() => parseConfig("{", {}), refused(/not JSON/));
});

test("state round-trips as UTF-8 JSON bytes, as the Rust SDK encodes it", () => {
  const state = { calls: 3, seen: ["café", "日本"], last: null };
  const bytes = encodeState(state);
  assert.ok(bytes instanceof Uint8Array);
  assert.deepEqual(Array.from(encodeState({ a: "é" })), Array.from(Buffer.from('{"a":"é"}', "utf8")));
  assert.deepEqual(decodeState(bytes), state);
  assert.deepEqual(decodeState(Array.from(bytes)), state, "a plain array of bytes works too");
  assert.equal(encodeState(undefined).length, 0);
  const big = { xs: Array.from({ length: 20000 }, (_, i) => i) };
  assert.deepEqual(decodeState(encodeState(big)), big);
  assert.throws(() => decodeState([0xff, 0xfe]), (e) => e instanceof PolicyError && e.kind === "invalid-state");
  assert.throws(() => decodeState(encodeState("x").slice(1)), (e) => e.kind === "invalid-state");
});
