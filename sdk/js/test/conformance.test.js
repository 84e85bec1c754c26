// The conformance vectors the host writes with its own encoder and validator (wit/conformance/,
// see its README): the tables decode every delta into the table the host's world holds and
// refuse every malformed one, and the rules give every action of every decision the host's
// outcome, word for word.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Action, Decision, Runner } from "../wasmsched.js";
import { check, verdicts } from "../rules.js";

const vectors = (file) => JSON.parse(readFileSync(new URL(`../../../wit/conformance/${file}`, import.meta.url), "utf8"));

/** A policy that does nothing, to look at what the runner keeps. */
class Inspect {
  decide() {
    return new Decision();
  }
}

const ENUMS = {
  HigherIsBetter: "higher-is-better",
  LowerIsBetter: "lower-is-better",
  Training: "training",
  Inference: "inference",
  NeverStarted: "never-started",
  Preempted: "preempted",
};

/**
 * A delta as serde wrote it (snake_case fields, enums by Rust name, NaN as null), as the
 * componentize-qjs binding hands it over: camelCase fields, enums as their WIT names, options as
 * null, f64 NaN as NaN, and every u64 a Number, or a BigInt when `big`.
 * @param {any} s @param {boolean} big
 */
function fromSerde(s, big = false) {
  const u64 = (/** @type {number} */ v) => (big ? BigInt(v) : v);
  const u64s = (/** @type {number[]} */ list) => list.map(u64);
  const floats = (/** @type {(number | null)[]} */ list) => list.map((v) => (v === null ? NaN : v));
  const j = s.jobs;
  const q = s.queue;
  const p = s.progress;
  return {
    timeMs: u64(s.time_ms),
    intervalMs: u64(s.interval_ms),
    resync: s.resync,
    nodes:
      s.nodes === null
        ? null
        : s.nodes.map((n) => ({
            name: n.name,
            cpuMillicores: u64(n.cpu_millicores),
            memoryBytes: u64(n.memory_bytes),
            gpuMemoryBytes: u64s(n.gpu_memory_bytes),
            gpuType: n.gpu_type,
          })),
    nodesDown: s.nodes_down,
    // Absent from vectors written before tenants: the list did not change.
    tenants:
      s.tenants == null
        ? null
        : s.tenants.map((t) => ({
            name: t.name,
            weight: t.weight,
            quotaGpus: t.quota_gpus,
            borrowingLimitGpus: t.borrowing_limit_gpus,
            cohort: t.cohort,
          })),
    gpus: { utilisationPercent: floats(s.gpus.utilisation_percent), memoryUsedBytes: u64s(s.gpus.memory_used_bytes) },
    added: s.added.map((a) => ({
      handle: a.handle,
      name: a.name,
      model: a.model,
      kind: ENUMS[a.kind],
      metrics: a.metrics.map((m) => ({ name: m.name, direction: ENUMS[m.direction] })),
      tiers: a.tiers === null ? null : { deliverable: a.tiers.deliverable, final: a.tiers.final_ },
      qoeTarget: a.qoe_target,
      maxEpochs: a.max_epochs,
      labels: a.labels.map(([k, v]) => [k, v]),
      arrivalMs: u64(a.arrival_ms),
      gpus: a.gpus,
      replicas: a.replicas,
      scaling: {
        gpuCounts: a.scaling.gpu_counts,
        batchSizeMin: a.scaling.batch_size_min,
        batchSizeMax: a.scaling.batch_size_max,
      },
      tenant: a.tenant ?? "default",
    })),
    removed: s.removed,
    jobs: {
      handle: j.handle,
      node: j.node,
      cpuLimitMillicores: u64s(j.cpu_limit_millicores),
      memoryLimitBytes: u64s(j.memory_limit_bytes),
      cpuUsedMillicores: u64s(j.cpu_used_millicores),
      memoryUsedBytes: u64s(j.memory_used_bytes),
      gpuCount: j.gpu_count,
      gpuNode: j.gpu_node,
      gpuIndex: j.gpu_index,
      gpuSharePercent: j.gpu_share_percent,
      gpuUsedPercent: floats(j.gpu_used_percent),
      runMs: u64s(j.run_ms),
      gpuMs: u64s(j.gpu_ms),
      batchSize: j.batch_size,
    },
    queue: {
      handle: q.handle,
      reason: q.reason.map((r) => ENUMS[r]),
      sinceMs: u64s(q.since_ms),
      runMs: u64s(q.run_ms),
      gpuMs: u64s(q.gpu_ms),
    },
    progress: {
      job: p.job,
      timeMs: u64s(p.time_ms),
      epoch: p.epoch,
      valueCount: p.value_count,
      values: floats(p.values),
    },
  };
}

const ms = (/** @type {number} */ seconds) => Math.round(seconds * 1000);
const orNull = (/** @type {number} */ v) => (Number.isNaN(v) ? null : v);

/** The table as the policy's view reads it, in the vectors' neutral form. @param {any} view */
function table(view) {
  const nodes = view.nodes().map((n) => ({
    name: n.name,
    cpu_millicores: n.cpu,
    memory_bytes: n.memory,
    gpus: n.gpus().map((g) => ({
      memory_bytes: g.memoryTotal,
      utilisation_percent: g.utilisationPercent,
      memory_used_bytes: g.memoryUsed,
    })),
  }));
  const jobs = [...view.jobs(), ...view.queue()]
    .sort((a, b) => a.id - b.id)
    .map((j) => ({
      handle: j.id,
      name: j.name,
      model: j.model,
      kind: j.kind,
      metrics: j.metrics.map((m) => ({ name: m.name, direction: m.direction })),
      gpus_asked: j.gpusAsked,
      replicas: j.replicas,
      arrival_ms: ms(j.arrival),
      running: j.isQueued
        ? null
        : {
            node: j.node,
            gpus: j.gpus.map((g) => [g.node, g.index]),
            cpu_limit_millicores: j.cpuLimit,
            memory_limit_bytes: j.memoryLimit,
            cpu_used_millicores: j.cpuUse,
            memory_used_bytes: j.memoryUse,
            gpu_share_percent: j.gpuShare,
            gpu_used_percent: j.gpuUsePercent,
            run_ms: ms(j.runTime),
            gpu_ms: ms(j.attainedService),
          },
      queued: j.isQueued
        ? { reason: j.waitReason, since_ms: ms(view.time) - ms(j.wait(view.time)), run_ms: ms(j.runTime), gpu_ms: ms(j.attainedService) }
        : null,
      history: {
        length: j.history.length,
        new: j.newRecords.length,
        epochs: j.history.map((r) => r.epoch),
        last: j.latest === null ? null : { time_ms: ms(j.latest.time), epoch: j.latest.epoch, values: j.latest.values.map(orNull) },
      },
    }));
  return { time_ms: ms(view.time), interval_ms: ms(view.interval), nodes, jobs };
}

/** Every snapshot vector through a fresh runner, u64s as Numbers or as BigInts. @param {boolean} big */
function decodeEverySnapshotVector(big) {
  const { cases } = vectors("snapshots.json");
  assert.ok(cases.length >= 5, "the vectors are there");
  for (const c of cases) {
    const runner = new Runner(new Inspect());
    c.ticks.forEach((tick, i) => {
      const where = `${c.name}, tick ${i + 1}`;
      if (tick.expect.table !== undefined) {
        runner.decide(fromSerde(tick.delta, big));
        assert.deepEqual(table(runner.view()), tick.expect.table, where);
      } else {
        assert.throws(() => runner.decide(fromSerde(tick.delta, big)), /malformed/, where);
      }
    });
  }
}

test("every snapshot vector decodes into the table the host holds, or is refused", () => {
  decodeEverySnapshotVector(false);
});

test("u64 columns that arrive as BigInts decode the same", () => {
  decodeEverySnapshotVector(true);
});

/** A neutral action as the SDK's, exactly as it crosses (no builder: they refuse out-of-range shares). */
function action(a) {
  switch (a.kind) {
    case "set-cpu":
      return new Action(a.job, { tag: "set-cpu", val: a.millicores });
    case "set-memory":
      return new Action(a.job, { tag: "set-memory", val: a.bytes });
    case "migrate":
      return new Action(a.job, { tag: "migrate", val: a.node });
    case "set-gpu-share":
      return new Action(a.job, { tag: "set-gpu-share", val: { gpu: a.gpu, percent: a.percent } });
    case "place":
      return new Action(a.job, { tag: "place", val: { nodes: a.nodes.map((n) => ({ node: n.node, gpus: n.gpus })), share: a.share } });
    case "resize": {
      const placement = { nodes: a.nodes.map((n) => ({ node: n.node, gpus: n.gpus })), share: a.share };
      return new Action(a.job, { tag: "resize", val: { placement, batchSize: a.batch_size } });
    }
    case "deliver":
    case "stop":
    case "preempt":
      return new Action(a.job, { tag: a.kind });
    default:
      throw new Error(`no action kind ${a.kind}`);
  }
}

test("every check vector gets the host's outcome for each action", () => {
  const { cases } = vectors("checks.json");
  assert.ok(cases.length >= 10, "the vectors are there");
  for (const c of cases) {
    const runner = new Runner(new Inspect());
    runner.decide(fromSerde(c.snapshot));
    const view = runner.view();
    const decision = new Decision(...c.decision.map(action));
    if (c.refused_whole !== null) {
      assert.throws(() => verdicts(view, decision), { name: "Oversized", message: c.refused_whole }, c.name);
      assert.equal(check(view, decision), c.refused_whole, c.name);
      continue;
    }
    const got = verdicts(view, decision).map((p) => (p === null ? "accepted" : p.message));
    assert.deepEqual(got, c.outcomes, c.name);
    const first = c.outcomes.findIndex((o) => o !== "accepted");
    assert.equal(check(view, decision), first < 0 ? null : `action ${first}: ${c.outcomes[first]}`, c.name);
  }
});
