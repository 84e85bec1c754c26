// @ts-check
/**
 * Build snapshots natively, so a JavaScript policy is unit-tested with `node --test` without
 * building a component. Mirrors the Rust SDK's `testing` module.
 *
 * A {@link TestWorld} plays the host: nodes, tenants, jobs with their declarations, measured use
 * and progress reports, a queue, a clock; it produces the same raw deltas the host sends (resync
 * and every node on the first call, then only what changed). A {@link Harness} runs a policy
 * against it tick by tick and, like the host, puts what the policy decides into force.
 *
 * ```js
 * const world = new TestWorld();
 * world.node("n0", 8000, gib(32));
 * const a = world.addJob(job("a", "cifar10").metric("accuracy"));
 * world.setCpuLimit(a, 500);
 * const h = Harness.fromConfig(MyPolicy, "{}", world);
 * const d = h.tick(30);
 * assert.equal(d.cpuLimitFor(a), null);
 * ```
 * @module wasmsched/testing
 */

import { Decision, Runner, gib } from "./wasmsched.js";

/** @typedef {import("./wasmsched.js").JobSpec} JobSpec */
/** @typedef {import("./wasmsched.js").PolicyClass} PolicyClass */
/** @typedef {import("./wasmsched.js").Policy} Policy */

/** Declares a job: start with {@link job}, chain what it declares. */
export class JobBuilder {
  /** @param {string} name @param {string} model */
  constructor(name, model) {
    /** @type {JobSpec} */
    this.spec = {
      handle: 0,
      name,
      model,
      kind: "training",
      metrics: [],
      tiers: null,
      qoeTarget: null,
      maxEpochs: null,
      labels: [],
      arrivalMs: 0,
      gpus: 0,
      replicas: 1,
      scaling: { gpuCounts: [], batchSizeMin: 0, batchSizeMax: 0 },
      tenant: "default",
    };
  }

  /** Make it an inference service. */
  inference() {
    this.spec.kind = "inference";
    return this;
  }

  /**
   * Declare a metric; the first declared is the main one.
   * @param {string} name @param {"higher-is-better" | "lower-is-better"} [direction]
   */
  metric(name, direction = "higher-is-better") {
    this.spec.metrics.push({ name, direction });
    return this;
  }

  /** @param {number} deliverable @param {number} final */
  tiers(deliverable, final) {
    this.spec.tiers = { deliverable, final };
    return this;
  }

  /** @param {number} target */
  qoeTarget(target) {
    this.spec.qoeTarget = target;
    return this;
  }

  /** @param {number} n */
  maxEpochs(n) {
    this.spec.maxEpochs = n;
    return this;
  }

  /** The GPUs it asks for, in all. @param {number} n */
  gpus(n) {
    this.spec.gpus = n;
    return this;
  }

  /** @param {number} n */
  replicas(n) {
    this.spec.replicas = n;
    return this;
  }

  /**
   * Make it elastic: it runs on any of `gpuCounts` GPUs (its `gpus` among them) at a global
   * batch size in `[min, max]` (both included), starting at the smallest.
   * @param {number[]} gpuCounts @param {[number, number]} batchSizes
   */
  elastic(gpuCounts, [batchSizeMin, batchSizeMax]) {
    this.spec.scaling = { gpuCounts: [...gpuCounts], batchSizeMin, batchSizeMax };
    return this;
  }

  /** @param {string} key @param {string} value */
  label(key, value) {
    this.spec.labels.push([key, value]);
    return this;
  }

  /** The tenant it belongs to (default "default"). @param {string} name */
  tenant(name) {
    this.spec.tenant = name;
    return this;
  }
}

/** A training job named `name` running `model`, with no metrics or targets yet. @param {string} name @param {string} model */
export const job = (name, model) => new JobBuilder(name, model);

/** @typedef {import("./wasmsched.js").TenantSpec} TenantSpec */

/** Declares a tenant: start with {@link tenant}, chain what it is entitled to, hand it to {@link TestWorld#declare}. */
export class TenantBuilder {
  /** @param {string} name */
  constructor(name) {
    /** As it crosses. @type {TenantSpec} */
    this.spec = { name, weight: 1, quotaGpus: null, borrowingLimitGpus: null, cohort: "" };
  }

  /** Its weight against the other tenants'. @param {number} weight */
  weight(weight) {
    this.spec.weight = weight;
    return this;
  }

  /** The GPUs guaranteed to it. @param {number} gpus */
  quota(gpus) {
    this.spec.quotaGpus = gpus;
    return this;
  }

  /** The most GPUs it may borrow beyond its quota. @param {number} gpus */
  borrowingLimit(gpus) {
    this.spec.borrowingLimitGpus = gpus;
    return this;
  }

  /** The cohort it lends to and borrows from. @param {string} cohort */
  cohort(cohort) {
    this.spec.cohort = cohort;
    return this;
  }
}

/** Tenant `name`: weight 1, no quota, no cohort. @param {string} name */
export const tenant = (name) => new TenantBuilder(name);

/** @param {number | { id: number }} x */
const idOf = (x) => (typeof x === "object" ? x.id : x);

/**
 * @typedef {object} TestJob
 * @property {JobSpec} spec
 * @property {{ node: number, runMs: number, gpuMs: number, cpuLimit: number | null, memoryLimit: number | null,
 *   cpuUsed: number, memoryUsed: number, gpuShare: number | null, gpuUsed: number, batchSize: number }} state
 * @property {{ node: number, index: number }[]} gpus
 * @property {{ reason: "never-started" | "preempted", sinceMs: number, runMs: number, gpuMs: number } | null} queued
 */

/** A host in miniature: it produces the same deltas a real host sends. */
export class TestWorld {
  constructor() {
    this.timeMs = 0;
    /** @type {number | null} */
    this.lastCallMs = null;
    /** @type {{ name: string, cpuMillicores: number, memoryBytes: number, gpuMemoryBytes: number[], gpuType: string }[]} */
    this.nodes = [];
    /** The nodes that cannot take work, ascending. @type {number[]} */
    this.down = [];
    /** Whether the nodes changed since the last snapshot. */
    this.nodesChanged = true;
    /** Per node, each GPU's [utilisation percent, memory used]. @type {[number, number][][]} */
    this.gpuUse = [];
    /** In handle order (handles only grow). @type {Map<number, TestJob>} */
    this.jobs = new Map();
    this.nextHandle = 0;
    /** @type {number[]} */
    this.added = [];
    /** @type {number[]} */
    this.removed = [];
    this.progress = noProgress();
    /** Declared tenants first, then those jobs named undeclared, as the host keeps them. @type {TenantSpec[]} */
    this.tenants = [];
    this.declared = 0;
    /** Whether the tenants changed since the last snapshot. */
    this.tenantsChanged = false;
  }

  /** Nodes n0, n1, … with these GPU counts (16 GiB each), 8 cores and 64 GiB apiece. @param {number[]} gpus */
  static gpuCluster(gpus) {
    const w = new TestWorld();
    gpus.forEach((n, i) => w.nodeWithGpus(`n${i}`, 8000, gib(64), new Array(n).fill(gib(16))));
    return w;
  }

  /**
   * Declare a tenant (replacing an earlier declaration of the same name); the tenants are sent
   * again on the next snapshot.
   * @param {TenantBuilder} builder
   */
  declare(builder) {
    const t = { ...builder.spec };
    const i = this.tenants.findIndex((d) => d.name === t.name);
    if (i >= 0 && i < this.declared) {
      this.tenants[i] = t;
    } else {
      if (i >= 0) this.tenants.splice(i, 1);
      this.tenants.splice(this.declared, 0, t);
      this.declared += 1;
    }
    this.tenantsChanged = true;
  }

  /** A job names tenant `name`: added undeclared (weight 1, no quota) when new. @private @param {string} name */
  nameTenant(name) {
    if (!this.tenants.some((t) => t.name === name)) {
      this.tenants.push({ ...tenant(name).spec });
      this.tenantsChanged = true;
    }
  }

  /** Add a node without GPUs; returns its id. @param {string} name @param {number} cpu millicores @param {number} memory bytes */
  node(name, cpu, memory) {
    return this.nodeWithGpus(name, cpu, memory, []);
  }

  /** Add a node with GPUs of these memory sizes, idle. @param {string} name @param {number} cpu @param {number} memory @param {number[]} gpus */
  nodeWithGpus(name, cpu, memory, gpus) {
    this.nodes.push({ name, cpuMillicores: cpu, memoryBytes: memory, gpuMemoryBytes: [...gpus], gpuType: "" });
    this.gpuUse.push(gpus.map(() => [0, 0]));
    this.nodesChanged = true;
    return this.nodes.length - 1;
  }

  /** Name the type of `node`'s GPUs ("a100"); nodes start with none. @param {number} node @param {string} gpuType */
  setGpuType(node, gpuType) {
    const n = this.nodes[node];
    if (n === undefined) throw new Error(`node ${node} is not in this TestWorld`);
    n.gpuType = gpuType;
    this.nodesChanged = true;
  }

  /** Say whether `node` can take work (false: NotReady or cordoned). @param {number} node @param {boolean} takesWork */
  setTakesWork(node, takesWork) {
    const others = this.down.filter((n) => n !== node);
    this.down = takesWork ? others : [...others, node].sort((a, b) => a - b);
  }

  /** A GPU's measured use over the last interval. @param {number} node @param {number} gpu @param {number} percent @param {number} memoryUsed */
  setGpuUse(node, gpu, percent, memoryUsed) {
    const slot = this.gpuUse[node]?.[gpu];
    if (slot === undefined) throw new Error(`node ${node} has no GPU ${gpu} in this TestWorld`);
    slot[0] = percent;
    slot[1] = memoryUsed;
  }

  /** Start a job on `node` (node 0 by default) without GPUs; returns its id. @param {JobBuilder} spec @param {number} [node] */
  addJob(spec, node = 0) {
    const id = this.queueJob(spec);
    this.start(id, node);
    return id;
  }

  /** A job arrives now and waits in the queue; returns its id. @param {JobBuilder} spec */
  queueJob(spec) {
    const handle = this.nextHandle++;
    const s = structuredCloneSpec(spec.spec);
    s.handle = handle;
    s.arrivalMs = this.timeMs;
    // As the host sends it: the counts ascending, holding the GPUs it asks for.
    s.scaling.gpuCounts = [...new Set([...s.scaling.gpuCounts, s.gpus])].sort((a, b) => a - b);
    if (s.tenant.trim() === "") s.tenant = "default";
    this.nameTenant(s.tenant);
    this.jobs.set(handle, {
      spec: s,
      state: {
        node: 0, runMs: 0, gpuMs: 0, cpuLimit: null, memoryLimit: null, cpuUsed: 0, memoryUsed: 0, gpuShare: null, gpuUsed: 0,
        batchSize: s.scaling.batchSizeMin,
      },
      gpus: [],
      queued: { reason: "never-started", sinceMs: this.timeMs, runMs: 0, gpuMs: 0 },
    });
    this.added.push(handle);
    return handle;
  }

  /** A queued job starts on `node` with these of its GPUs. @param {number | { id: number }} id @param {number} node @param {number[]} [gpus] */
  start(id, node, gpus = []) {
    this.startOn(id, node, gpus.map((index) => ({ node, index })));
  }

  /** @private @param {number | { id: number }} id @param {number} node @param {{ node: number, index: number }[]} gpus */
  startOn(id, node, gpus) {
    const j = this.job(id);
    if (j.queued !== null) {
      j.state.runMs = j.queued.runMs;
      j.state.gpuMs = j.queued.gpuMs;
      j.queued = null;
    }
    j.state.node = node;
    j.gpus = gpus;
  }

  /** A running job goes back to the queue, preempted. @param {number | { id: number }} id */
  preempt(id) {
    const j = this.job(id);
    if (j.queued === null) {
      j.queued = { reason: "preempted", sinceMs: this.timeMs, runMs: j.state.runMs, gpuMs: j.state.gpuMs };
      j.gpus = [];
    }
  }

  /** @private @param {number | { id: number }} id */
  job(id) {
    const j = this.jobs.get(idOf(id));
    if (j === undefined) throw new Error(`job ${idOf(id)} is not in this TestWorld`);
    return j;
  }

  /** End a job. @param {number | { id: number }} id */
  removeJob(id) {
    const handle = idOf(id);
    if (this.jobs.delete(handle)) {
      this.added = this.added.filter((h) => h !== handle);
      this.removed.push(handle);
    }
  }

  /** @param {number | { id: number }} id @param {number} millicores */
  setCpuUse(id, millicores) {
    this.job(id).state.cpuUsed = millicores;
  }

  /** @param {number | { id: number }} id @param {number} bytes */
  setMemoryUse(id, bytes) {
    this.job(id).state.memoryUsed = bytes;
  }

  /** The CPU limit as the host reports it (null: unlimited). @param {number | { id: number }} id @param {number | null} millicores */
  setCpuLimit(id, millicores) {
    this.job(id).state.cpuLimit = millicores;
  }

  /** The memory limit as the host reports it (null: unlimited). @param {number | { id: number }} id @param {number | null} bytes */
  setMemoryLimit(id, bytes) {
    this.job(id).state.memoryLimit = bytes;
  }

  /** Move the job to `node`. @param {number | { id: number }} id @param {number} node */
  place(id, node) {
    this.job(id).state.node = node;
  }

  /** The job reports a record now. @param {number | { id: number }} id @param {number} epoch @param {number[]} values */
  report(id, epoch, values) {
    const p = this.progress;
    p.job.push(idOf(id));
    p.timeMs.push(this.timeMs);
    p.epoch.push(epoch);
    p.valueCount.push(values.length);
    p.values.push(...values);
  }

  /** Move the clock forward; running jobs accrue run time and GPU time. @param {number} seconds */
  advance(seconds) {
    const ms = Math.round(seconds * 1000);
    this.timeMs += ms;
    for (const j of this.jobs.values()) {
      if (j.queued !== null) continue;
      j.state.runMs += ms;
      j.state.gpuMs += ms * Math.max(j.gpus.length, 1);
    }
  }

  /** The clock, seconds. */
  get time() {
    return this.timeMs / 1000;
  }

  /** The delta since the previous snapshot, as the host sends it (a resync on the first). */
  snapshot() {
    const intervalMs = this.lastCallMs === null ? 0 : this.timeMs - this.lastCallMs;
    const resync = this.lastCallMs === null;
    this.lastCallMs = this.timeMs;
    const sendNodes = resync || this.nodesChanged;
    this.nodesChanged = false;
    // The tenants cross when they changed (a declaration, a job naming a new one).
    const sendTenants = resync || this.tenantsChanged;
    this.tenantsChanged = false;
    const jobs = {
      handle: /** @type {number[]} */ ([]), node: /** @type {number[]} */ ([]),
      cpuLimitMillicores: /** @type {number[]} */ ([]), memoryLimitBytes: /** @type {number[]} */ ([]),
      cpuUsedMillicores: /** @type {number[]} */ ([]), memoryUsedBytes: /** @type {number[]} */ ([]),
      gpuCount: /** @type {number[]} */ ([]), gpuNode: /** @type {number[]} */ ([]), gpuIndex: /** @type {number[]} */ ([]),
      gpuSharePercent: /** @type {number[]} */ ([]), gpuUsedPercent: /** @type {number[]} */ ([]),
      runMs: /** @type {number[]} */ ([]), gpuMs: /** @type {number[]} */ ([]),
      batchSize: /** @type {number[]} */ ([]),
    };
    const queue = {
      handle: /** @type {number[]} */ ([]), reason: /** @type {string[]} */ ([]), sinceMs: /** @type {number[]} */ ([]),
      runMs: /** @type {number[]} */ ([]), gpuMs: /** @type {number[]} */ ([]),
    };
    for (const [handle, j] of this.jobs) {
      if (j.queued === null) {
        const s = j.state;
        jobs.handle.push(handle);
        jobs.node.push(s.node);
        jobs.cpuLimitMillicores.push(s.cpuLimit ?? 0);
        jobs.memoryLimitBytes.push(s.memoryLimit ?? 0);
        jobs.cpuUsedMillicores.push(s.cpuUsed);
        jobs.memoryUsedBytes.push(s.memoryUsed);
        jobs.gpuCount.push(j.gpus.length);
        for (const g of j.gpus) {
          jobs.gpuNode.push(g.node);
          jobs.gpuIndex.push(g.index);
        }
        jobs.gpuSharePercent.push(s.gpuShare ?? 0);
        jobs.gpuUsedPercent.push(s.gpuUsed);
        jobs.runMs.push(s.runMs);
        jobs.gpuMs.push(s.gpuMs);
        jobs.batchSize.push(s.batchSize);
      } else {
        queue.handle.push(handle);
        queue.reason.push(j.queued.reason);
        queue.sinceMs.push(j.queued.sinceMs);
        queue.runMs.push(j.queued.runMs);
        queue.gpuMs.push(j.queued.gpuMs);
      }
    }
    const added = (resync ? [...this.jobs.keys()] : this.added)
      .map((h) => this.jobs.get(h))
      .filter((j) => j !== undefined)
      .map((j) => structuredCloneSpec(/** @type {TestJob} */ (j).spec));
    this.added = [];
    const removed = resync ? [] : this.removed;
    this.removed = [];
    const progress = this.progress;
    this.progress = noProgress();
    return {
      timeMs: this.timeMs,
      intervalMs,
      resync,
      nodes: sendNodes ? this.nodes.map((n) => ({ ...n, gpuMemoryBytes: [...n.gpuMemoryBytes] })) : null,
      nodesDown: [...this.down],
      tenants: sendTenants ? this.tenants.map((t) => ({ ...t })) : null,
      gpus: {
        utilisationPercent: this.gpuUse.flat().map((g) => g[0]),
        memoryUsedBytes: this.gpuUse.flat().map((g) => g[1]),
      },
      added,
      removed,
      jobs,
      queue,
      progress,
    };
  }

  /**
   * Put a decision into force, as the host would (it trusts the decision; the host checks it
   * first): limits, migrations, placements, preemptions, resizes and stops.
   * @param {Decision} decision
   */
  apply(decision) {
    for (const a of decision.actions) {
      const j = this.jobs.get(a.job);
      if (j === undefined) continue;
      const k = a.kind;
      switch (k.tag) {
        case "set-cpu":
          j.state.cpuLimit = k.val;
          break;
        case "set-memory":
          j.state.memoryLimit = k.val;
          break;
        case "migrate":
          j.state.node = k.val;
          break;
        case "stop":
          this.removeJob(a.job);
          break;
        case "place":
          this.startOn(a.job, k.val.nodes[0]?.node ?? 0, k.val.nodes.flatMap((e) => e.gpus.map((index) => ({ node: e.node, index }))));
          break;
        case "preempt":
          this.preempt(a.job);
          break;
        case "resize": {
          const nodes = k.val.placement.nodes;
          j.state.node = nodes[0]?.node ?? j.state.node;
          j.gpus = nodes.flatMap((e) => e.gpus.map((index) => ({ node: e.node, index })));
          if (k.val.batchSize !== null) j.state.batchSize = k.val.batchSize;
          break;
        }
        case "set-gpu-share":
          j.state.gpuShare = k.val.percent === 0 ? null : k.val.percent;
          break;
        case "deliver":
          break;
      }
    }
  }
}

/** @returns {{ job: number[], timeMs: number[], epoch: number[], valueCount: number[], values: number[] }} */
function noProgress() {
  return { job: [], timeMs: [], epoch: [], valueCount: [], values: [] };
}

/** @param {JobSpec} s @returns {JobSpec} */
function structuredCloneSpec(s) {
  return {
    ...s,
    metrics: s.metrics.map((m) => ({ ...m })),
    tiers: s.tiers === null ? null : { ...s.tiers },
    labels: s.labels.map(([k, v]) => [k, v]),
    scaling: { ...s.scaling, gpuCounts: [...s.scaling.gpuCounts] },
  };
}

/** A policy and a {@link TestWorld}, ticked together. */
export class Harness {
  /**
   * Run `policy` (an instance) against `world`.
   * @param {Policy} policy @param {TestWorld} [world]
   */
  constructor(policy, world = new TestWorld()) {
    this.runner = new Runner(policy);
    /** The world the policy runs in; change it between ticks. */
    this.world = world;
  }

  /**
   * Build the policy from its config JSON (and saved state) as the host's `init` does; throws
   * the {@link PolicyError} the policy refuses them with.
   * @param {PolicyClass} PolicyClass @param {string} configJson @param {TestWorld} [world]
   * @param {ArrayLike<number> | null} [savedState]
   */
  static fromConfig(PolicyClass, configJson, world = new TestWorld(), savedState = null) {
    return new Harness(Runner.init(PolicyClass, configJson, savedState).policy, world);
  }

  /**
   * Advance the clock by `seconds`, call the policy, check the decision crosses (it is turned
   * into the contract's form as the component would), and put it into force.
   * @param {number} seconds
   */
  tick(seconds) {
    this.world.advance(seconds);
    const decision = this.runner.decide(this.world.snapshot());
    const problems = wireProblems(decision.toWit());
    if (problems.length > 0) throw new Error(`the decision would not cross to the host: ${problems.join("; ")}`);
    this.world.apply(decision);
    return decision;
  }

  /** The policy, to inspect its state. */
  get policy() {
    return this.runner.policy;
  }

  /** The world as the policy saw it on the last tick. */
  view() {
    return this.runner.view();
  }
}

/**
 * Checks that a value has the shape the component runtime accepts for the contract's
 * `decision`: every u64 an integer Number (a BigInt traps under componentize-qjs 0.4.5), every
 * variant a known tag. Returns a list of problems (empty when it crosses).
 * @param {any} raw
 * @returns {string[]}
 */
/** A policy that decides nothing: run it to see a world as a policy sees it. */
export class Inspect {
  decide() {
    return new Decision();
  }
}

/**
 * A runner of {@link Inspect} that took `world`'s next snapshot: `seen(w).view()`.
 * @param {TestWorld} world
 */
export function seen(world) {
  const runner = new Runner(new Inspect());
  runner.decide(world.snapshot());
  return runner;
}

export function wireProblems(raw) {
  /** @type {string[]} */
  const problems = [];
  const intIn = (/** @type {string} */ what, /** @type {unknown} */ v, /** @type {number} */ max) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max) problems.push(`${what} is ${typeof v} ${String(v)}`);
  };
  if (raw.nextCallMs !== null) intIn("nextCallMs", raw.nextCallMs, Number.MAX_SAFE_INTEGER);
  (raw.pending ?? []).forEach((/** @type {any} */ p, /** @type {number} */ i) => {
    intIn(`pending[${i}].job`, p.job, 0xffff_ffff);
    if (typeof p.reason !== "string") problems.push(`pending[${i}].reason is not a string`);
  });
  raw.actions.forEach((/** @type {any} */ a, /** @type {number} */ i) => {
    intIn(`actions[${i}].job`, a.job, 0xffff_ffff);
    if (typeof a.reason !== "string") problems.push(`actions[${i}].reason is not a string`);
    const k = a.kind;
    switch (k.tag) {
      case "set-cpu":
      case "set-memory":
        if (k.val !== null) intIn(`actions[${i}] ${k.tag}`, k.val, Number.MAX_SAFE_INTEGER);
        break;
      case "migrate":
        intIn(`actions[${i}] migrate`, k.val, 0xffff_ffff);
        break;
      case "set-gpu-share":
        intIn(`actions[${i}] gpu`, k.val.gpu, 0xffff_ffff);
        intIn(`actions[${i}] percent`, k.val.percent, 255);
        break;
      case "place":
      case "resize": {
        const p = k.tag === "place" ? k.val : k.val.placement;
        for (const e of p.nodes) {
          intIn(`actions[${i}] node`, e.node, 0xffff_ffff);
          e.gpus.forEach((/** @type {unknown} */ g) => intIn(`actions[${i}] gpu`, g, 0xffff_ffff));
        }
        if (typeof p.share !== "boolean") problems.push(`actions[${i}] share is not a boolean`);
        if (k.tag === "resize" && k.val.batchSize !== null) intIn(`actions[${i}] batch size`, k.val.batchSize, 0xffff_ffff);
        break;
      }
      case "deliver":
      case "stop":
      case "preempt":
        break;
      default:
        problems.push(`actions[${i}] has an unknown tag ${String(k.tag)}`);
    }
  });
  return problems;
}
