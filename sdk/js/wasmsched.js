// @ts-check
/**
 * wasmsched JavaScript SDK: what a scheduling policy written in JavaScript depends on.
 *
 * Write a class with `decide(snapshot)`, export `exportPolicy(YourClass)` as `policy`, and build
 * the file into a component with componentize-qjs (see README.md). Like the Rust SDK, this
 * keeps the job table inside the component: each tick only what changed crosses from the host,
 * and `decide` sees complete jobs ({@link Snapshot}, {@link Job}).
 *
 * Units are plain Numbers, named by the API: times and durations in **seconds**, CPU in
 * **millicores**, memory in **bytes**. 64-bit integers from the host are turned into Numbers at
 * the boundary (whether the runtime hands them over as Numbers or BigInts), and go back as
 * integer Numbers, which is what componentize-qjs 0.4.5 accepts for `u64` (a BigInt traps).
 *
 * No dependencies; runs the same inside the component (QuickJS) and natively in Node, where
 * `testing.js` drives a policy without building anything.
 * @module wasmsched
 */

import { Ledger, tenantLimit, usableDemand } from "./rules.js";

/** What tenants hold against their limits ({@link Snapshot#ledger}): the host's own rules. */
export { Ledger, OverLimit } from "./rules.js";

/** How many progress records the SDK keeps per job (the oldest are dropped first). */
export const HISTORY_LIMIT = 512;

// ---------------------------------------------------------------------------------------------
// Logging

/** @typedef {"trace" | "debug" | "info" | "warn" | "error"} Level */

/**
 * The contract's `wasmsched:policy/host` import inside a component; null natively (Node cannot
 * load that specifier), where log lines go to the sink instead.
 * @type {{ log(level: Level, message: string): void } | null}
 */
const host = await import(/* componentize-qjs binds this */ "wasmsched:policy/host").then(
  (m) => (m.default && typeof m.default.log === "function" ? m.default : typeof m.log === "function" ? m : null),
  () => null,
);

/** @param {Level} level @param {string} message */
const stderrSink = (level, message) => console.error(`[policy ${level}] ${message}`);
let sink = stderrSink;

/**
 * Where log lines go natively (unit tests); inside a component they always go to the host.
 * @param {((level: Level, message: string) => void) | null} fn null restores stderr
 * @returns {(level: Level, message: string) => void} the previous sink
 */
export function setLogSink(fn) {
  const previous = sink;
  sink = fn ?? stderrSink;
  return previous;
}

/** Whether log lines reach the host (true inside a component). */
export const hostLogging = host !== null;

/** @param {Level} level @param {unknown} message */
function emit(level, message) {
  const text = String(message);
  if (host !== null) host.log(level, text);
  else sink(level, text);
}

/** Log a line; in a component the host re-emits it under target `policy` with the policy's name. */
export const log = {
  /** @param {unknown} m */ trace: (m) => emit("trace", m),
  /** @param {unknown} m */ debug: (m) => emit("debug", m),
  /** @param {unknown} m */ info: (m) => emit("info", m),
  /** @param {unknown} m */ warn: (m) => emit("warn", m),
  /** @param {unknown} m */ error: (m) => emit("error", m),
};

// ---------------------------------------------------------------------------------------------
// Errors

/** @typedef {"invalid-config" | "invalid-state" | "failed"} ErrorKind */
/** @typedef {{ tag: ErrorKind, val: string }} WitPolicyError the contract's `policy-error` */

const ERROR_KINDS = new Set(["invalid-config", "invalid-state", "failed"]);

/** A policy's own failure, as opposed to a bug: it crosses as the contract's `policy-error`. */
export class PolicyError extends Error {
  /** @param {ErrorKind} kind @param {string} message */
  constructor(kind, message) {
    super(message);
    this.name = "PolicyError";
    /** @type {ErrorKind} */
    this.kind = ERROR_KINDS.has(kind) ? kind : "failed";
  }

  /** The config was refused; say which key and why. @param {string} message */
  static invalidConfig(message) {
    return new PolicyError("invalid-config", message);
  }

  /** The saved state could not be used. @param {string} message */
  static invalidState(message) {
    return new PolicyError("invalid-state", message);
  }

  /** Anything else. @param {string} message */
  static failed(message) {
    return new PolicyError("failed", message);
  }

  /** @returns {WitPolicyError} */
  toWit() {
    return { tag: this.kind, val: this.message };
  }
}

/**
 * Any thrown value as the contract's `policy-error` (which componentize-qjs wants thrown as
 * `{ tag, val }`; anything else thrown traps the instance): a {@link PolicyError} keeps its
 * kind, anything else (a TypeError in the policy, say) becomes `failed` with its message.
 * @param {unknown} e
 * @returns {WitPolicyError}
 */
export function toWitError(e) {
  if (e instanceof PolicyError) return e.toWit();
  if (e instanceof Error) {
    const frame = (e.stack ?? "").split("\n").map((l) => l.trim()).find((l) => l.startsWith("at "));
    return { tag: "failed", val: `${e.name}: ${e.message}${frame ? ` (${frame})` : ""}` };
  }
  const o = /** @type {any} */ (e);
  if (o !== null && typeof o === "object" && ERROR_KINDS.has(o.tag) && typeof o.val === "string") {
    return { tag: o.tag, val: o.val };
  }
  return { tag: "failed", val: String(e) };
}

// ---------------------------------------------------------------------------------------------
// Numbers at the boundary

/** A u64 from the host as a Number. @param {number | bigint} v */
const num = (v) => (typeof v === "bigint" ? Number(v) : v);

/**
 * A list of u64 from the host as Numbers (copied only when they came as BigInts).
 * @param {ArrayLike<number | bigint>} list
 * @returns {ArrayLike<number>}
 */
const nums = (list) =>
  list.length > 0 && typeof list[0] === "bigint" ? Array.from(list, Number) : /** @type {ArrayLike<number>} */ (list);

/**
 * A u64 for the host: a non-negative integer Number (rounded); refuses NaN, infinities and
 * negatives, which would otherwise trap the component far from the mistake.
 * @param {string} what @param {unknown} v
 */
function u64(what, v) {
  const n = typeof v === "bigint" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) {
    throw new RangeError(`${what} must be a finite number >= 0, not ${String(v)}`);
  }
  return Math.min(Math.round(n), Number.MAX_SAFE_INTEGER);
}

/** An integer in [0, max] for the host. @param {string} what @param {unknown} v @param {number} max */
function uint(what, v, max) {
  const n = typeof v === "bigint" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > max) {
    throw new RangeError(`${what} must be an integer from 0 to ${max}, not ${String(v)}`);
  }
  return n;
}

/** A job or node id: the number itself or anything with an `id` (a {@link Job}, a {@link Node}). */
/** @typedef {number | { id: number }} Id */

/** @param {string} what @param {Id} x */
const idOf = (what, x) => uint(what, typeof x === "object" && x !== null ? x.id : x, 0xffff_ffff);

// ---------------------------------------------------------------------------------------------
// The job and node tables kept inside the component

/**
 * @typedef {object} ProgressRecord One progress report of a job, as kept in its history.
 * @property {number} time when the job reported it, seconds
 * @property {number} epoch epochs completed (training) or windows served (inference)
 * @property {number[]} values in the order of the job's metrics; NaN where missing
 * @property {number} value the main metric (the first), NaN when absent
 */

/**
 * @typedef {object} JobSpec What a job declared (crosses once, in `added`).
 * @property {number} handle
 * @property {string} name
 * @property {string} model
 * @property {"training" | "inference"} kind
 * @property {{ name: string, direction: "higher-is-better" | "lower-is-better" }[]} metrics
 * @property {{ deliverable: number, final: number } | null} tiers
 * @property {number | null} qoeTarget
 * @property {number | null} maxEpochs
 * @property {[string, string][]} labels
 * @property {number} arrivalMs
 * @property {number} gpus
 * @property {number} replicas
 * @property {Scaling} scaling
 * @property {string} tenant the tenant (team, queue) it belongs to ("default" when it names none)
 */

/**
 * @typedef {object} Scaling What a job can be resized to. A rigid job lists one GPU count (its
 *   `gpus`) and one batch size; an elastic one several counts and a range of batch sizes.
 * @property {number[]} gpuCounts the GPU counts it can run on, ascending (`[0]` for a CPU job)
 * @property {number} batchSizeMin the smallest global batch size (0: none to set)
 * @property {number} batchSizeMax the largest global batch size
 */

/**
 * @typedef {object} JobNumbers One job's numbers, as the last tick's columns gave them.
 * @property {number} node
 * @property {number} gpuFirst its GPUs are `gpuCount` slots of the table's GPU list from here
 * @property {number} gpuCount
 * @property {number} runMs
 * @property {number} gpuMs
 * @property {number | null} cpuLimit
 * @property {number | null} memoryLimit
 * @property {number} cpuUsed
 * @property {number} memoryUsed
 * @property {number | null} gpuShare
 * @property {number} gpuUsed
 * @property {number} batchSize its global batch size in force (0: none the host knows)
 */

/**
 * @typedef {object} QueueNumbers
 * @property {"never-started" | "preempted"} reason
 * @property {number} sinceMs
 * @property {number} runMs
 * @property {number} gpuMs
 */

/**
 * @typedef {object} JobEntry
 * @property {JobSpec} spec
 * @property {JobNumbers} state
 * @property {QueueNumbers | null} queued why and since when it waits, while it is queued
 * @property {ProgressRecord[]} history oldest first, at most HISTORY_LIMIT
 * @property {number} fresh how many of the history's records arrived on this tick
 * @property {number} firstSeen seconds
 */

/** @returns {JobNumbers} */
const noNumbers = () => ({
  node: 0,
  gpuFirst: 0,
  gpuCount: 0,
  runMs: 0,
  gpuMs: 0,
  cpuLimit: null,
  memoryLimit: null,
  cpuUsed: 0,
  memoryUsed: 0,
  gpuShare: null,
  gpuUsed: 0,
  batchSize: 0,
});

/** @param {any} s @returns {JobSpec} */
function specFrom(s) {
  return {
    handle: s.handle,
    name: s.name,
    model: s.model,
    kind: s.kind,
    metrics: Array.from(s.metrics ?? [], (m) => ({ name: m.name, direction: m.direction })),
    tiers: s.tiers == null ? null : { deliverable: s.tiers.deliverable, final: s.tiers.final },
    qoeTarget: s.qoeTarget ?? null,
    maxEpochs: s.maxEpochs ?? null,
    labels: Array.from(s.labels ?? [], ([k, v]) => /** @type {[string, string]} */ ([k, v])),
    arrivalMs: num(s.arrivalMs),
    gpus: s.gpus,
    replicas: s.replicas,
    scaling: {
      gpuCounts: Array.from(s.scaling?.gpuCounts ?? [s.gpus]),
      batchSizeMin: s.scaling?.batchSizeMin ?? 0,
      batchSizeMax: s.scaling?.batchSizeMax ?? 0,
    },
    // A delta from before tenants names none: the default tenant's.
    tenant: s.tenant || "default",
  };
}

/** @param {ArrayLike<number>} list */
const sum = (list) => {
  let total = 0;
  for (let i = 0; i < list.length; i++) total += list[i];
  return total;
};

/** Every live job, in handle order, with its history: the guest-side half of the cost rule. */
export class JobTable {
  constructor() {
    /** @type {JobEntry[]} */
    this.entries = [];
    /** The GPUs running jobs hold, each job's in a run (`JobNumbers.gpuFirst`). @type {{ node: number, index: number }[]} */
    this.gpus = [];
    this.running = 0;
  }

  /** @param {number} handle @returns {number} the entry's index, or -1 */
  index(handle) {
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const h = this.entries[mid].spec.handle;
      if (h === handle) return mid;
      if (h < handle) lo = mid + 1;
      else hi = mid;
    }
    return -1;
  }

  /**
   * Checks a tick's columns: an error message for columns that disagree or a handle no host
   * gives (host bugs), or null.
   * @param {any} raw a `snapshot` as the binding hands it over
   */
  static check(raw) {
    const c = raw.jobs;
    const rows = c.handle.length;
    const columns = [
      c.node, c.cpuLimitMillicores, c.memoryLimitBytes, c.cpuUsedMillicores, c.memoryUsedBytes,
      c.gpuCount, c.gpuSharePercent, c.gpuUsedPercent, c.runMs, c.gpuMs, c.batchSize,
    ];
    if (
      !columns.every((col) => col.length === rows) ||
      c.gpuNode.length !== c.gpuIndex.length ||
      sum(c.gpuCount) !== c.gpuNode.length
    ) {
      return "job-state columns differ in length";
    }
    const p = raw.progress;
    const records = p.job.length;
    if (p.timeMs.length !== records || p.epoch.length !== records || p.valueCount.length !== records) {
      return "progress columns differ in length";
    }
    if (sum(p.valueCount) !== p.values.length) return "progress values do not add up to the value counts";
    const q = raw.queue;
    const queued = q.handle.length;
    if (q.reason.length !== queued || q.sinceMs.length !== queued || q.runMs.length !== queued || q.gpuMs.length !== queued) {
      return "queue columns differ in length";
    }
    if (Array.from(raw.added).some((s) => s.handle === 0xffff_ffff)) {
      return `a job handle is ${0xffff_ffff}, past the last one a host gives`;
    }
    return null;
  }

  /**
   * Folds one tick's delta into the table; the columns must have passed {@link JobTable.check}.
   * @param {any} raw
   * @returns {{ time: number, interval: number }} seconds
   */
  apply(raw) {
    const now = num(raw.timeMs) / 1000;
    if (raw.resync) this.entries.length = 0;
    if (raw.removed.length > 0) {
      const gone = new Set(Array.from(raw.removed));
      this.entries = this.entries.filter((e) => !gone.has(e.spec.handle));
    }
    if (raw.added.length > 0) {
      let last = this.entries.length > 0 ? this.entries[this.entries.length - 1].spec.handle : -1;
      let inOrder = true;
      for (const s of raw.added) {
        inOrder &&= s.handle > last;
        last = s.handle;
        this.entries.push({ spec: specFrom(s), state: noNumbers(), queued: null, history: [], fresh: 0, firstSeen: now });
      }
      if (!inOrder) {
        // Stable: of two entries for one handle, the older one stays.
        this.entries.sort((a, b) => a.spec.handle - b.spec.handle);
        this.entries = this.entries.filter((e, i, all) => i === 0 || all[i - 1].spec.handle !== e.spec.handle);
      }
    }
    for (const e of this.entries) e.fresh = 0;

    const c = raw.jobs;
    const cpuLimit = nums(c.cpuLimitMillicores);
    const memoryLimit = nums(c.memoryLimitBytes);
    const cpuUsed = nums(c.cpuUsedMillicores);
    const memoryUsed = nums(c.memoryUsedBytes);
    const runMs = nums(c.runMs);
    const gpuMs = nums(c.gpuMs);
    let gpuFirst = 0;
    this.running = c.handle.length;
    for (let i = 0; i < c.handle.length; i++) {
      const handle = c.handle[i];
      // The host sends rows in handle order, so the common case is a straight zip.
      const idx = this.entries[i]?.spec.handle === handle ? i : this.index(handle);
      if (idx >= 0) {
        const e = this.entries[idx];
        e.state = {
          node: c.node[i],
          gpuFirst,
          gpuCount: c.gpuCount[i],
          runMs: runMs[i],
          gpuMs: gpuMs[i],
          cpuLimit: cpuLimit[i] === 0 ? null : cpuLimit[i],
          memoryLimit: memoryLimit[i] === 0 ? null : memoryLimit[i],
          cpuUsed: cpuUsed[i],
          memoryUsed: memoryUsed[i],
          gpuShare: c.gpuSharePercent[i] === 0 ? null : c.gpuSharePercent[i],
          gpuUsed: c.gpuUsedPercent[i],
          batchSize: c.batchSize[i],
        };
        e.queued = null;
      }
      gpuFirst += c.gpuCount[i];
    }
    this.gpus = Array.from(c.gpuNode, (node, k) => ({ node, index: c.gpuIndex[k] }));

    const q = raw.queue;
    const since = nums(q.sinceMs);
    const qRun = nums(q.runMs);
    const qGpu = nums(q.gpuMs);
    for (let i = 0; i < q.handle.length; i++) {
      const idx = this.index(q.handle[i]);
      if (idx >= 0) this.entries[idx].queued = { reason: q.reason[i], sinceMs: since[i], runMs: qRun[i], gpuMs: qGpu[i] };
    }

    const p = raw.progress;
    const times = nums(p.timeMs);
    let offset = 0;
    for (let i = 0; i < p.job.length; i++) {
      const count = p.valueCount[i];
      const values = Array.from({ length: count }, (_, k) => p.values[offset + k]);
      offset += count;
      const idx = this.index(p.job[i]);
      if (idx < 0) continue;
      const e = this.entries[idx];
      if (e.history.length === HISTORY_LIMIT) e.history.shift();
      e.history.push(Object.freeze({ time: times[i] / 1000, epoch: p.epoch[i], values, value: count > 0 ? values[0] : NaN }));
      e.fresh = Math.min(e.fresh + 1, HISTORY_LIMIT);
    }
    return { time: now, interval: num(raw.intervalMs) / 1000 };
  }
}

/**
 * @typedef {object} NodeSpec A node and its capacity (crosses only when the nodes change).
 * @property {string} name
 * @property {number} cpu millicores
 * @property {number} memory bytes
 * @property {number[]} gpuMemory each GPU's memory in bytes, in GPU order
 * @property {string} gpuType the type of its GPUs as the cluster names it; "" when unknown
 */

/**
 * @typedef {object} TenantSpec A tenant and what it is entitled to (crosses only when the list changes).
 * @property {string} name
 * @property {number} weight its share against the other tenants' weights (fair share); above 0
 * @property {number | null} quotaGpus the GPUs guaranteed to it; null: no quota, no limit
 * @property {number | null} borrowingLimitGpus the most GPUs it may borrow beyond its quota within
 *   its cohort; null: as many as the cohort has idle
 * @property {string} cohort the cohort whose members lend each other their idle quota; "" for none
 */

/** The nodes and the tenants as last sent and every GPU's use this tick. */
export class NodeTable {
  constructor() {
    /** @type {NodeSpec[]} */
    this.nodes = [];
    /** Node i's GPUs are `firstGpu[i]` to `firstGpu[i + 1]` of the GPU columns. */
    this.firstGpu = [0];
    /** @type {ArrayLike<number>} */
    this.utilisation = [];
    /** @type {ArrayLike<number>} */
    this.memoryUsed = [];
    /** The nodes that cannot take work now, ascending. @type {number[]} */
    this.down = [];
    /** The tenants, as last sent. @type {TenantSpec[]} */
    this.tenants = [];
  }

  /**
   * Checks the tick's GPU columns against the nodes (the new ones if they changed), and takes
   * both unless `dryRun`. An error message when they do not match (a host bug), or null.
   * @param {any} raw @param {boolean} dryRun
   */
  apply(raw, dryRun) {
    const fresh = raw.nodes == null ? null : Array.from(raw.nodes, (n) => ({
      name: n.name,
      cpu: num(n.cpuMillicores),
      memory: num(n.memoryBytes),
      gpuMemory: Array.from(n.gpuMemoryBytes, num),
      gpuType: n.gpuType ?? "",
    }));
    const firstGpu = fresh === null ? this.firstGpu : [0];
    if (fresh !== null) for (const n of fresh) firstGpu.push(firstGpu[firstGpu.length - 1] + n.gpuMemory.length);
    const total = firstGpu[firstGpu.length - 1];
    const g = raw.gpus;
    if (g.utilisationPercent.length !== total || g.memoryUsedBytes.length !== total) {
      return `GPU columns (${g.utilisationPercent.length} and ${g.memoryUsedBytes.length} entries) do not match the nodes' ${total} GPUs`;
    }
    if (dryRun) return null;
    if (fresh !== null) {
      this.nodes = fresh;
      this.firstGpu = firstGpu;
    }
    this.utilisation = g.utilisationPercent;
    this.memoryUsed = nums(g.memoryUsedBytes);
    this.down = Array.from(raw.nodesDown ?? []);
    // null: the list did not change (a delta from before tenants has none either).
    if (raw.tenants != null) {
      this.tenants = Array.from(raw.tenants, (t) => ({
        name: t.name,
        weight: t.weight ?? 1,
        quotaGpus: t.quotaGpus ?? null,
        borrowingLimitGpus: t.borrowingLimitGpus ?? null,
        cohort: t.cohort ?? "",
      }));
    }
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// Views

/** What a policy sees on a tick: the time, the nodes and every live job. */
export class Snapshot {
  /** @param {number} time @param {number} interval @param {NodeTable} nodes @param {JobTable} table */
  constructor(time, interval, nodes, table) {
    /** The host's clock in seconds (virtual in the simulator). */
    this.time = time;
    /** Seconds since this policy's previous call (0 on the first). */
    this.interval = interval;
    /** @private */ this._nodes = nodes;
    /** @private */ this._table = table;
  }

  /** Every node, in handle order. @returns {Node[]} */
  nodes() {
    return this._nodes.nodes.map((_, i) => new Node(i, this._nodes));
  }

  /** One node, or null. @param {Id} id @returns {Node | null} */
  node(id) {
    const i = typeof id === "object" ? id.id : id;
    return Number.isInteger(i) && i >= 0 && i < this._nodes.nodes.length ? new Node(i, this._nodes) : null;
  }

  /** The nodes that cannot take work now (NotReady, cordoned), ascending. @returns {number[]} */
  get nodesDown() {
    return [...this._nodes.down];
  }

  /** Every tenant, declared ones first; every job's tenant is among them. @returns {Tenant[]} */
  tenants() {
    return this._nodes.tenants.map((t, i) => new Tenant(i, t));
  }

  /** Tenant `name`, or null. @param {string} name @returns {Tenant | null} */
  tenant(name) {
    const i = this.tenantIndex(name);
    return i === null ? null : new Tenant(i, this._nodes.tenants[i]);
  }

  /** The index of tenant `name` in {@link Snapshot#tenants}, or null. @param {string} name @returns {number | null} */
  tenantIndex(name) {
    const i = this._nodes.tenants.findIndex((t) => t.name === name);
    return i < 0 ? null : i;
  }

  /**
   * Each tenant's limits and the GPUs its running jobs hold now, indexed as
   * {@link Snapshot#tenants}: `ledger.room(t)` is how many more GPUs tenant `t` may take before
   * the host refuses a placement (null: no limit).
   * @returns {Ledger}
   */
  ledger() {
    const tenants = this._nodes.tenants;
    const ledger = new Ledger(tenants.map((t, i) => new Tenant(i, t).entitlement()));
    if (ledger.limitsAnything()) {
      /** @type {Map<string, number>} */
      const index = new Map();
      tenants.forEach((t, i) => {
        if (!index.has(t.name)) index.set(t.name, i);
      });
      for (const job of this.jobs()) {
        const t = index.get(job.tenant);
        if (t !== undefined) ledger.hold(t, job.gpus.length);
      }
    }
    return ledger;
  }

  /**
   * How many more GPUs tenant `name` may take before the host refuses a placement, by what its
   * running jobs hold now; null when no limit applies (no quota, or no such tenant). To plan
   * several placements, take {@link Snapshot#ledger} once and `hold` on it.
   * @param {string} name @returns {number | null}
   */
  room(name) {
    const i = this.tenantIndex(name);
    return i === null ? null : this.ledger().room(i);
  }

  /** Every running job, in handle order. @returns {Job[]} */
  jobs() {
    return this._table.entries.filter((e) => e.queued === null).map((e) => new Job(e, this._table));
  }

  /** Every job that waits to be placed, in handle order (a preempted job keeps its place). @returns {Job[]} */
  queue() {
    return this._table.entries.filter((e) => e.queued !== null).map((e) => new Job(e, this._table));
  }

  /** How many jobs run. */
  get jobCount() {
    return this._table.running;
  }

  /** How many jobs wait to be placed. */
  get queueLength() {
    return this._table.entries.length - this._table.running;
  }

  /** One live job (running or queued), or null. @param {Id} id @returns {Job | null} */
  job(id) {
    const i = this._table.index(typeof id === "object" ? id.id : id);
    return i < 0 ? null : new Job(this._table.entries[i], this._table);
  }

  /** The running jobs placed on `node`. @param {Id} node @returns {Job[]} */
  jobsOn(node) {
    const n = typeof node === "object" ? node.id : node;
    return this.jobs().filter((j) => j.node === n);
  }

  /** How many running jobs hold each GPU of `node`, in GPU order. @param {Id} node @returns {number[]} */
  gpuHolders(node) {
    const n = typeof node === "object" ? node.id : node;
    const held = new Array(this.node(n)?.gpuCount ?? 0).fill(0);
    for (const g of this._table.gpus) if (g.node === n && g.index < held.length) held[g.index] += 1;
    return held;
  }

  /** The GPUs of `node` that no running job holds. @param {Id} node @returns {number[]} */
  freeGpus(node) {
    return this.gpuHolders(node).flatMap((h, i) => (h === 0 ? [i] : []));
  }
}

/** A node and its capacity. */
export class Node {
  /** @param {number} id @param {NodeTable} table */
  constructor(id, table) {
    /** Its handle (index in the node list). */
    this.id = id;
    /** @private */ this._table = table;
  }

  /** @private */
  get _spec() {
    return this._table.nodes[this.id];
  }

  get name() {
    return this._spec.name;
  }

  /** CPU capacity, millicores. */
  get cpu() {
    return this._spec.cpu;
  }

  /** Memory capacity, bytes. */
  get memory() {
    return this._spec.memory;
  }

  get gpuCount() {
    return this._spec.gpuMemory.length;
  }

  /** The type of its GPUs as the cluster names it ("t4", "a100"); "" when unknown. */
  get gpuType() {
    return this._spec.gpuType;
  }

  /**
   * Whether it can take work now: false while it is NotReady or cordoned (the host refuses to
   * place, migrate or resize onto it; its jobs still run).
   */
  get takesWork() {
    return !this._table.down.includes(this.id);
  }

  /**
   * Its GPUs with their use over the last interval.
   * @returns {{ utilisationPercent: number, memoryUsed: number, memoryTotal: number }[]}
   */
  gpus() {
    const first = this._table.firstGpu[this.id];
    return this._spec.gpuMemory.map((total, k) => ({
      utilisationPercent: this._table.utilisation[first + k],
      memoryUsed: this._table.memoryUsed[first + k],
      memoryTotal: total,
    }));
  }
}

/** A tenant (team, queue, virtual cluster) and what it is entitled to. */
export class Tenant {
  /** @param {number} index @param {TenantSpec} spec */
  constructor(index, spec) {
    /** Its index in {@link Snapshot#tenants} (and in {@link Snapshot#ledger}). */
    this.index = index;
    /** @private */ this._spec = spec;
  }

  get name() {
    return this._spec.name;
  }

  /** Its weight against the other tenants' (fair share); the host keeps it above 0. */
  get weight() {
    return this._spec.weight;
  }

  /** The GPUs guaranteed to it; null: no quota (and no limit). @returns {number | null} */
  get quota() {
    return this._spec.quotaGpus;
  }

  /** The most GPUs it may borrow beyond its quota within its cohort; null: as many as the cohort has idle. @returns {number | null} */
  get borrowingLimit() {
    return this._spec.borrowingLimitGpus;
  }

  /** Its cohort, the tenants that lend each other their idle quota; null: none. @returns {string | null} */
  get cohort() {
    return this._spec.cohort === "" ? null : this._spec.cohort;
  }

  /** The most GPUs it may hold by its own entitlement (its cohort may allow fewer); null when unlimited. */
  limit() {
    return tenantLimit(this.entitlement());
  }

  /** Its limits as the shared rules ({@link Ledger}) read them. @returns {import("./rules.js").Entitlement} */
  entitlement() {
    return { name: this.name, quota: this.quota, borrowingLimit: this.borrowingLimit, cohort: this.cohort };
  }

  /**
   * The GPUs it can use now, given what it `held` and what its waiting jobs ask (`asks`): the
   * host's rule (rules.js `usableDemand`). @param {number} held @param {Iterable<number>} asks
   * @param {number} capacity @returns {number}
   */
  usableDemand(held, asks, capacity) {
    return usableDemand(this.entitlement(), held, asks, capacity);
  }
}

/** One live job: its declaration, placement, limits, measured use and progress history. */
export class Job {
  /** @param {JobEntry} entry @param {JobTable} table */
  constructor(entry, table) {
    /** @private */ this._e = entry;
    /** @private */ this._table = table;
  }

  /** Its handle. */
  get id() {
    return this._e.spec.handle;
  }

  get name() {
    return this._e.spec.name;
  }

  /** The model or application ("cifar10", "bert"). */
  get model() {
    return this._e.spec.model;
  }

  /** "training" or "inference". */
  get kind() {
    return this._e.spec.kind;
  }

  /** The metrics it reports; the first is the main one. */
  get metrics() {
    return this._e.spec.metrics;
  }

  /** The main metric's direction ("higher-is-better" when none is declared). */
  get direction() {
    return this._e.spec.metrics[0]?.direction ?? "higher-is-better";
  }

  /** TRADL's two-tier targets `{ deliverable, final }`, or null. */
  get tiers() {
    return this._e.spec.tiers;
  }

  /** DQoES target (seconds per epoch, or milliseconds per request), or null. */
  get qoeTarget() {
    return this._e.spec.qoeTarget;
  }

  get maxEpochs() {
    return this._e.spec.maxEpochs;
  }

  /** The tenant it belongs to ("default" when it names none). */
  get tenant() {
    return this._e.spec.tenant;
  }

  /** A label from its declaration, or null. @param {string} key */
  label(key) {
    return this._e.spec.labels.find(([k]) => k === key)?.[1] ?? null;
  }

  /** The node it runs on. */
  get node() {
    return this._e.state.node;
  }

  /** Its CPU limit in millicores; null means unlimited. */
  get cpuLimit() {
    return this._e.state.cpuLimit;
  }

  /** Its memory limit in bytes; null means unlimited. */
  get memoryLimit() {
    return this._e.state.memoryLimit;
  }

  /** Mean CPU use over the last interval, millicores. */
  get cpuUse() {
    return this._e.state.cpuUsed;
  }

  /** Memory use at the end of the last interval, bytes. */
  get memoryUse() {
    return this._e.state.memoryUsed;
  }

  /** The GPUs it holds while it runs (none while queued). @returns {{ node: number, index: number }[]} */
  get gpus() {
    if (this.isQueued) return [];
    const s = this._e.state;
    return this._table.gpus.slice(s.gpuFirst, s.gpuFirst + s.gpuCount);
  }

  /** Its share of its GPUs in percent, or null when not regulated. */
  get gpuShare() {
    return this._e.state.gpuShare;
  }

  /** GPU use attributed to it over the last interval, percent. */
  get gpuUsePercent() {
    return this._e.state.gpuUsed;
  }

  /** The GPUs it asks for, in all. */
  get gpusAsked() {
    return this._e.spec.gpus;
  }

  /** Into how many pieces it may be split across nodes (1: one node). */
  get replicas() {
    return Math.max(this._e.spec.replicas, 1);
  }

  /** The GPU counts and batch sizes it can run at (a rigid job: its GPU count alone). @returns {Scaling} */
  get scaling() {
    return this._e.spec.scaling;
  }

  /** Whether it may be resized to another GPU count. */
  get isElastic() {
    return this._e.spec.scaling.gpuCounts.length > 1;
  }

  /** Its global batch size in force (0: none the host knows; 0 while queued). */
  get batchSize() {
    return this._e.queued === null ? this._e.state.batchSize : 0;
  }

  /** When it arrived, seconds. */
  get arrival() {
    return this._e.spec.arrivalMs / 1000;
  }

  get isQueued() {
    return this._e.queued !== null;
  }

  /** Why it waits ("never-started" or "preempted"), or null while it runs. */
  get waitReason() {
    return this._e.queued?.reason ?? null;
  }

  /** How long it has waited at `now` (seconds) since it arrived or was preempted; 0 while it runs. @param {number} now */
  wait(now) {
    const q = this._e.queued;
    return q === null ? 0 : Math.max(now - q.sinceMs / 1000, 0);
  }

  /** How long it has run, in all its runs, seconds. */
  get runTime() {
    return (this._e.queued?.runMs ?? this._e.state.runMs) / 1000;
  }

  /** GPU-seconds received (each GPU held counts; its run time when it holds none), as Tiresias ranks. */
  get attainedService() {
    return (this._e.queued?.gpuMs ?? this._e.state.gpuMs) / 1000;
  }

  /** When this policy instance first saw it, seconds. */
  get firstSeen() {
    return this._e.firstSeen;
  }

  /** Its progress records, oldest first (at most HISTORY_LIMIT). @returns {readonly ProgressRecord[]} */
  get history() {
    return this._e.history;
  }

  /** The records that arrived on this tick. @returns {ProgressRecord[]} */
  get newRecords() {
    return this._e.history.slice(this._e.history.length - this._e.fresh);
  }

  /** Its latest record, or null. @returns {ProgressRecord | null} */
  get latest() {
    return this._e.history[this._e.history.length - 1] ?? null;
  }

  /** Epochs completed, by its latest record (0 before the first). */
  get epoch() {
    return this.latest?.epoch ?? 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Decisions

/**
 * @typedef {{ tag: "set-cpu", val: number | null } | { tag: "set-memory", val: number | null }
 *   | { tag: "migrate", val: number } | { tag: "deliver" } | { tag: "stop" } | { tag: "preempt" }
 *   | { tag: "set-gpu-share", val: { gpu: number, percent: number } }
 *   | { tag: "place", val: { nodes: { node: number, gpus: number[] }[], share: boolean } }
 *   | { tag: "resize", val: { placement: { nodes: { node: number, gpus: number[] }[], share: boolean },
 *       batchSize: number | null } }} ActionKind
 *   the contract's `action-kind`, exactly as it crosses
 */

/** A placement's `[node, gpus]` entries as they cross. @param {[Id, number[]][]} entries */
const entriesOf = (entries) =>
  Array.from(entries, ([node, gpus]) => ({
    node: idOf("node", node),
    gpus: Array.from(gpus, (g) => uint("a GPU index", g, 0xffff_ffff)),
  }));

/** One thing to do to one job, and why. Build with the static builders. */
export class Action {
  /** @param {Id} job @param {ActionKind} kind */
  constructor(job, kind) {
    /** The job's handle. */
    this.job = idOf("job", job);
    /** @type {ActionKind} */
    this.kind = kind;
    this.reason = "";
  }

  /** Cap the job's CPU, millicores. @param {Id} job @param {number} millicores */
  static setCpu(job, millicores) {
    return new Action(job, { tag: "set-cpu", val: u64("a CPU limit", millicores) });
  }

  /** Lift the job's CPU limit. @param {Id} job */
  static liftCpu(job) {
    return new Action(job, { tag: "set-cpu", val: null });
  }

  /** Cap the job's memory, bytes. @param {Id} job @param {number} bytes */
  static setMemory(job, bytes) {
    return new Action(job, { tag: "set-memory", val: u64("a memory limit", bytes) });
  }

  /** Lift the job's memory limit. @param {Id} job */
  static liftMemory(job) {
    return new Action(job, { tag: "set-memory", val: null });
  }

  /** Restart the job on `node` from its last checkpoint. @param {Id} job @param {Id} node */
  static migrate(job, node) {
    return new Action(job, { tag: "migrate", val: idOf("node", node) });
  }

  /** The job's model reached its deliverable target: hand it over. @param {Id} job */
  static deliver(job) {
    return new Action(job, { tag: "deliver" });
  }

  /** End the job. @param {Id} job */
  static stop(job) {
    return new Action(job, { tag: "stop" });
  }

  /** Give the job `percent` of GPU `gpu` on its node. @param {Id} job @param {number} gpu @param {number} percent */
  static setGpuShare(job, gpu, percent) {
    return new Action(job, {
      tag: "set-gpu-share",
      val: { gpu: uint("a GPU index", gpu, 0xffff_ffff), percent: uint("a GPU share", percent, 100) },
    });
  }

  /**
   * Start a queued job on `node` with these of its GPUs (none for a CPU job); each must be free.
   * @param {Id} job @param {Id} node @param {number[]} [gpus]
   */
  static place(job, node, gpus = []) {
    return Action.placeOn(job, [[node, gpus]], false);
  }

  /**
   * Start a queued job over several nodes, one `[node, gpus]` entry per node; with `share`, it
   * may take GPUs other jobs hold (co-location).
   * @param {Id} job @param {[Id, number[]][]} entries @param {boolean} [share]
   */
  static placeOn(job, entries, share = false) {
    return new Action(job, { tag: "place", val: { nodes: entriesOf(entries), share: Boolean(share) } });
  }

  /**
   * Restart a running job from its checkpoint on other GPUs, one `[node, gpus]` entry per node
   * (their total one of its `scaling.gpuCounts`), at `batchSize` (null keeps it). It pays its
   * restore delay, as a migration does.
   * @param {Id} job @param {[Id, number[]][]} entries @param {number | null} [batchSize]
   */
  static resize(job, entries, batchSize = null) {
    const batch = batchSize === null || batchSize === undefined ? null : uint("a batch size", batchSize, 0xffff_ffff);
    return new Action(job, { tag: "resize", val: { placement: { nodes: entriesOf(entries), share: false }, batchSize: batch } });
  }

  /** Checkpoint a running job and send it back to the queue with its progress. @param {Id} job */
  static preempt(job) {
    return new Action(job, { tag: "preempt" });
  }

  /** Say why; the reason goes into the audit log. @param {string} reason */
  because(reason) {
    this.reason = String(reason);
    return this;
  }

  /** The CPU limit it sets: a number, null when it lifts the limit, undefined for other actions. */
  get cpuLimit() {
    return this.kind.tag === "set-cpu" ? this.kind.val : undefined;
  }

  /** The memory limit it sets, like {@link Action#cpuLimit}. */
  get memoryLimit() {
    return this.kind.tag === "set-memory" ? this.kind.val : undefined;
  }

  /** As it crosses to the host. */
  toWit() {
    return { job: this.job, kind: this.kind, reason: this.reason };
  }
}

export const { setCpu, liftCpu, setMemory, liftMemory, migrate, deliver, stop, setGpuShare, place, placeOn, preempt, resize } =
  Action;

/** A policy's answer for one tick. */
export class Decision {
  /** @param {Action[]} actions */
  constructor(...actions) {
    /** @type {Action[]} */
    this.actions = [];
    /** When the policy wants its next call, seconds from now; null: every tick. @type {number | null} */
    this.nextCall = null;
    /** Why queued jobs wait, as said with {@link Decision#pending}. @type {{ job: number, reason: string }[]} */
    this.pendingReasons = [];
    this.push(...actions);
  }

  /**
   * Say why queued job `job` waits, in a few words ("8 A100 asked, 3 free"); `status`, the
   * audit log and the report show it. The host keeps the first 120 bytes and the first reason
   * per job.
   * @param {Id} job @param {string} reason
   */
  pending(job, reason) {
    this.pendingReasons.push({ job: idOf("job", job), reason: String(reason) });
    return this;
  }

  /** Add actions. @param {Action[]} actions */
  push(...actions) {
    for (const a of actions) {
      if (!(a instanceof Action)) throw new TypeError(`a Decision holds Actions (use the builders), not ${String(a)}`);
      this.actions.push(a);
    }
    return this;
  }

  /**
   * Ask to be called again no sooner than `seconds` from now (the host reads more than an hour
   * as an hour). Negative or NaN reads as 0, as in the Rust SDK.
   * @param {number} seconds
   */
  callAgainIn(seconds) {
    this.nextCall = seconds;
    return this;
  }

  isEmpty() {
    return this.actions.length === 0;
  }

  /** The last CPU limit set on `job` (null: lifted), undefined when none. @param {Id} job */
  cpuLimitFor(job) {
    const id = idOf("job", job);
    return this.actions.findLast((a) => a.job === id && a.kind.tag === "set-cpu")?.cpuLimit;
  }

  /** The last memory limit set on `job` (null: lifted), undefined when none. @param {Id} job */
  memoryLimitFor(job) {
    const id = idOf("job", job);
    return this.actions.findLast((a) => a.job === id && a.kind.tag === "set-memory")?.memoryLimit;
  }

  /** As it crosses to the host: every u64 an integer Number. */
  toWit() {
    const s = this.nextCall;
    const nextCallMs = s === null ? null : typeof s === "number" && Number.isFinite(s) && s > 0 ? Math.min(Math.round(s * 1000), Number.MAX_SAFE_INTEGER) : 0;
    const pending = this.pendingReasons.map(({ job, reason }) => ({ job, reason }));
    return { actions: this.actions.map((a) => a.toWit()), nextCallMs, pending };
  }

  /**
   * What `decide` returned, as a Decision: a Decision, an array of Actions, or nothing.
   * @param {unknown} value
   */
  static from(value) {
    if (value instanceof Decision) return value;
    if (value === undefined || value === null) return new Decision();
    if (Array.isArray(value)) return new Decision(...value);
    throw new TypeError(`decide must return a Decision, an array of Actions or nothing, not ${String(value)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Config and state

/** @param {unknown} v */
const kindOf = (v) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

/**
 * Parses a policy's config JSON (empty means `{}`) over its defaults. Refuses anything but an
 * object, any key the defaults do not have (naming it), and a value of another JSON type than
 * its default (a default of null takes anything).
 * @template {Record<string, unknown>} T
 * @param {string | null | undefined} json
 * @param {T} defaults
 * @returns {T}
 */
export function parseConfig(json, defaults) {
  const text = json == null ? "" : String(json);
  /** @type {unknown} */
  let given = {};
  if (text.trim() !== "") {
    try {
      given = JSON.parse(text);
    } catch (e) {
      throw PolicyError.invalidConfig(`the config is not JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  if (kindOf(given) !== "object") throw PolicyError.invalidConfig(`the config must be a table, not ${kindOf(given)}`);
  const known = Object.keys(defaults);
  const out = /** @type {Record<string, unknown>} */ ({ ...defaults });
  for (const [key, value] of Object.entries(/** @type {object} */ (given))) {
    if (!Object.prototype.hasOwnProperty.call(defaults, key)) {
      const expected = known.length === 0 ? "this policy takes no config" : `expected one of ${known.map((k) => `\`${k}\``).join(", ")}`;
      throw PolicyError.invalidConfig(`unknown key \`${key}\`: ${expected}`);
    }
    const want = kindOf(defaults[key]);
    if (want !== "null" && kindOf(value) !== want) {
      throw PolicyError.invalidConfig(`\`${key}\` must be a ${want}, not ${kindOf(value)} ${JSON.stringify(value)}`);
    }
    out[key] = value;
  }
  return /** @type {T} */ (out);
}

/** Encodes a policy's state (anything JSON can hold) as UTF-8 JSON bytes, as the Rust SDK does. @param {unknown} state */
export function encodeState(state) {
  const json = JSON.stringify(state);
  if (json === undefined) return new Uint8Array(0);
  const binary = unescape(encodeURIComponent(json));
  return Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
}

/** Decodes what {@link encodeState} made. @param {ArrayLike<number>} bytes @returns {unknown} */
export function decodeState(bytes) {
  try {
    let binary = "";
    for (let i = 0; i < bytes.length; i += 8192) {
      binary += String.fromCharCode.apply(null, Array.from(Array.prototype.slice.call(bytes, i, i + 8192)));
    }
    return JSON.parse(decodeURIComponent(escape(binary)));
  } catch (e) {
    throw PolicyError.invalidState(`the saved state is not UTF-8 JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Running a policy

/**
 * @typedef {object} Policy A scheduling policy: an instance of a class that has
 *   `static config` (its config keys with their defaults; omit it for a policy without config),
 *   optionally `static places = true` (it places queued jobs itself), a constructor taking the
 *   parsed config, and the methods below.
 * @property {(snapshot: Snapshot) => Decision | Action[] | void} decide
 * @property {() => unknown} [saveState] what a newer version starts from (JSON-able)
 * @property {(state: unknown) => void} [restoreState] take over what an older version saved
 */

/**
 * @typedef {{ new (config: any): Policy, config?: Record<string, unknown>, places?: boolean }} PolicyClass
 */

/** Drives one policy: keeps the tables and converts to and from the contract's types. */
export class Runner {
  /** @param {Policy} policy */
  constructor(policy) {
    this.policy = policy;
    /** @private */ this._table = new JobTable();
    /** @private */ this._nodes = new NodeTable();
    /** @private */ this._time = 0;
    /** @private */ this._interval = 0;
  }

  /**
   * What `init` does: parse the config over the class's defaults, build the policy, hand it the
   * saved state (when not empty).
   * @param {PolicyClass} PolicyClass
   * @param {string} [configJson]
   * @param {ArrayLike<number> | null} [savedState]
   */
  static init(PolicyClass, configJson = "", savedState = null) {
    const config = parseConfig(configJson, PolicyClass.config ?? {});
    const policy = new PolicyClass(config);
    if (savedState != null && savedState.length > 0 && typeof policy.restoreState === "function") {
      policy.restoreState(decodeState(savedState));
    }
    return new Runner(policy);
  }

  /**
   * Fold the tick's delta into the tables and ask the policy. A malformed snapshot is refused
   * without touching the tables.
   * @param {any} raw a `snapshot` as the binding hands it over
   * @returns {Decision}
   */
  decide(raw) {
    const problem = JobTable.check(raw) ?? this._nodes.apply(raw, true);
    if (problem !== null) throw PolicyError.failed(`the host sent a malformed snapshot: ${problem}`);
    this._nodes.apply(raw, false);
    ({ time: this._time, interval: this._interval } = this._table.apply(raw));
    return Decision.from(this.policy.decide(this.view()));
  }

  /** What `decide` does, in the contract's types. @param {any} raw */
  decideRaw(raw) {
    return this.decide(raw).toWit();
  }

  /** The world as the policy saw it on the last call. */
  view() {
    return new Snapshot(this._time, this._interval, this._nodes, this._table);
  }

  /** What `save-state` does. */
  saveState() {
    return typeof this.policy.saveState === "function" ? encodeState(this.policy.saveState()) : new Uint8Array(0);
  }
}

/**
 * The object to export as the component's `wasmsched:policy/policy` interface:
 * `export const policy = exportPolicy(MyPolicy);`. It keeps the one runner for the module's
 * life, and turns every failure into the contract's `policy-error` (so a bug in the policy is
 * reported as `failed`, not a trap).
 * @param {PolicyClass} PolicyClass
 */
export function exportPolicy(PolicyClass) {
  /** @type {Runner | null} */
  let runner = null;
  return {
    /** @param {string} configJson @param {ArrayLike<number> | null} savedState */
    init(configJson, savedState) {
      try {
        runner = Runner.init(PolicyClass, configJson, savedState);
      } catch (e) {
        throw toWitError(e);
      }
      return { places: Boolean(PolicyClass.places) };
    },
    /** @param {any} snapshot */
    decide(snapshot) {
      if (runner === null) throw { tag: "failed", val: "decide called before init" };
      try {
        return runner.decideRaw(snapshot);
      } catch (e) {
        throw toWitError(e);
      }
    },
    saveState() {
      if (runner === null) return new Uint8Array(0);
      try {
        return runner.saveState();
      } catch (e) {
        log.warn(`save-state failed, saving nothing: ${toWitError(e).val}`);
        return new Uint8Array(0);
      }
    },
  };
}

/** `n` mebibytes in bytes. @param {number} n */
export const mib = (n) => n * 2 ** 20;
/** `n` gibibytes in bytes. @param {number} n */
export const gib = (n) => n * 2 ** 30;
