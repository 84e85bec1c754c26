// @ts-check
/**
 * The contract's rules, as the host applies them: the GPU book (who holds which GPU), the
 * tenants' limits ({@link Ledger}) and the checks every action passes before it applies, each
 * refusal a {@link Problem} whose message is the host's text, word for word. A port of the Rust
 * crate `wasmsched-rules` (`rules/src/book.rs`, `rules/src/tenants.rs` and `rules/src/check.rs`),
 * step for step; the vectors in `wit/conformance/checks.json`, which the host writes, hold its
 * outcomes, and this SDK's tests compare.
 *
 * {@link check} says whether the host would accept every action of a decision made on a
 * {@link Snapshot}; {@link verdicts} gives each action's outcome. Actions are checked in order
 * against the world as the earlier accepted ones leave it: a preemption frees GPUs that a later
 * placement may take, and a job placed, preempted or stopped by the decision is not acted on
 * again in it.
 *
 * ```js
 * import { check } from "wasmsched-sdk-js/rules";
 * assert.equal(check(harness.view(), decision), null);
 * ```
 * @module wasmsched/rules
 */

/** @typedef {import("./wasmsched.js").Snapshot} Snapshot */
/** @typedef {import("./wasmsched.js").Decision} Decision */
/** @typedef {import("./wasmsched.js").ActionKind} ActionKind */

/** Docker refuses CPU limits below a hundredth of a core. */
export const MIN_CPU_MILLICORES = 10;
/** Docker refuses memory limits below 6 MiB. */
export const MIN_MEMORY_BYTES = 6 * 2 ** 20;

/** The most actions a decision may hold for `jobs` live jobs (running or queued). @param {number} jobs */
export const maxActions = (jobs) => 64 + 8 * jobs;

/**
 * How many GPUs each piece of a job of `gpus` GPUs in `replicas` pieces takes on a node:
 * `gpus / replicas`, or single GPUs when that does not divide.
 * @param {number} gpus @param {number} replicas
 */
export function gpusPerPiece(gpus, replicas) {
  const pieces = Math.max(replicas, 1);
  return gpus % pieces === 0 ? Math.max(gpus / pieces, 1) : 1;
}

/** Who holds each GPU of each node; a GPU is free when nobody holds it, shared when several do. */
export class GpuBook {
  /** A book of nodes with these many GPUs each, all free. @param {Iterable<number>} gpusPerNode */
  constructor(gpusPerNode) {
    /** Where each node's GPUs start in `holders`; one more entry than nodes. */
    this.offsets = [0];
    for (const gpus of gpusPerNode) this.offsets.push(this.offsets[this.offsets.length - 1] + gpus);
    /** Per GPU, in node order then index order, the jobs that hold it. @type {number[][]} */
    this.holdersOf = Array.from({ length: this.offsets[this.offsets.length - 1] }, () => []);
  }

  /** How many nodes it has. */
  nodeCount() {
    return this.offsets.length - 1;
  }

  /** How many GPUs `node` has; null when there is no such node. @param {number} node */
  gpusOn(node) {
    return Number.isInteger(node) && node >= 0 && node + 1 < this.offsets.length ? this.offsets[node + 1] - this.offsets[node] : null;
  }

  /** @param {number} node @param {number} index @returns {number | null} */
  at(node, index) {
    const gpus = this.gpusOn(node);
    return gpus !== null && Number.isInteger(index) && index >= 0 && index < gpus ? this.offsets[node] + index : null;
  }

  /** Whether GPU `index` of `node` exists. @param {number} node @param {number} index */
  exists(node, index) {
    return this.at(node, index) !== null;
  }

  /** The jobs holding GPU `index` of `node`, the first to take it first. @param {number} node @param {number} index */
  holders(node, index) {
    const i = this.at(node, index);
    return i === null ? [] : [...this.holdersOf[i]];
  }

  /** Whether GPU `index` of `node` exists and nobody holds it. @param {number} node @param {number} index */
  isFree(node, index) {
    const i = this.at(node, index);
    return i !== null && this.holdersOf[i].length === 0;
  }

  /** `job` holds GPU `index` of `node` (nothing happens for a GPU that does not exist). @param {number} node @param {number} index @param {number} job */
  hold(node, index, job) {
    const i = this.at(node, index);
    if (i !== null) this.holdersOf[i].push(job);
  }

  /** `job` lets go of GPU `index` of `node`, if it held it. @param {number} node @param {number} index @param {number} job */
  release(node, index, job) {
    const i = this.at(node, index);
    if (i === null) return;
    const k = this.holdersOf[i].indexOf(job);
    if (k >= 0) this.holdersOf[i].splice(k, 1);
  }

  /** The free GPUs of `node`, lowest index first. @param {number} node @returns {number[]} */
  freeOn(node) {
    const gpus = this.gpusOn(node) ?? 0;
    return Array.from({ length: gpus }, (_, i) => i).filter((i) => this.isFree(node, i));
  }

  /** How many GPUs of `node` are free. @param {number} node */
  freeCount(node) {
    return this.freeOn(node).length;
  }
}

/**
 * @typedef {object} Entitlement What one tenant is entitled to, as the limits need it.
 * @property {string} name for messages
 * @property {number | null} quota GPUs guaranteed to it; null: no quota, no limit
 * @property {number | null} borrowingLimit GPUs it may hold beyond its quota, borrowed within its
 *   cohort; null: no limit of its own
 * @property {string | null} cohort its cohort's name; null: it borrows from nobody
 */

/**
 * The most GPUs a tenant may hold by its own entitlement (its cohort may allow fewer); null when
 * unlimited: its quota without a cohort, quota + borrowing limit with one (no borrowing limit:
 * none of its own).
 * @param {Entitlement} t @returns {number | null}
 */
export function tenantLimit(t) {
  if (t.quota === null) return null;
  if (t.cohort === null) return t.quota;
  return t.borrowingLimit === null ? null : t.quota + t.borrowingLimit;
}

/**
 * The GPUs tenant `t` can use now, over which entitlements are shared: what it `held` plus what
 * its waiting jobs ask (`asks`), leaving out any job that alone asks for more than its limit or
 * than the `capacity` taking work, and in all no more than its limit (or than it holds, when
 * that is more). The host's rule.
 * @param {Entitlement} t @param {number} held @param {Iterable<number>} asks @param {number} capacity
 * @returns {number}
 */
export function usableDemand(t, held, asks, capacity) {
  const limit = tenantLimit(t);
  const most = limit === null ? capacity : Math.min(limit, capacity);
  let asked = 0;
  for (const a of asks) if (a <= most) asked += a;
  return Math.min(held + asked, Math.max(most, held));
}

/**
 * Why GPUs for a tenant's job are refused: `kind` is "Tenant" (it would pass its own limit;
 * `fields` tenant, holds, asks, limit, quota) or "Cohort" (its cohort would hold more than its
 * members' quotas; `fields` tenant, cohort, holds, asks, quotas). Its message is the host's text.
 */
export class OverLimit extends Error {
  /** @param {"Tenant" | "Cohort"} kind @param {Record<string, any>} f */
  constructor(kind, f) {
    super(
      kind === "Tenant"
        ? `tenant ${f.tenant} holds ${f.holds} GPUs of its limit of ${f.limit} (${
            f.quota === f.limit ? "its quota" : `quota ${f.quota} + borrowing ${f.limit - f.quota}`
          }); ${f.asks} more would pass it`
        : `tenant ${f.tenant}'s cohort ${f.cohort} holds ${f.holds} GPUs of its members' ${f.quotas} of quota; ${f.asks} more would pass it (nothing idle to borrow)`,
    );
    this.name = "OverLimit";
    this.kind = kind;
    this.fields = f;
  }
}

/**
 * Who holds how many GPUs, per tenant and per cohort, against their limits. A tenant with a
 * quota holds at most its quota without a cohort, and at most quota + borrowing limit (none: as
 * much as the cohort has idle) with one; the members of a cohort that have quotas hold, together,
 * at most the sum of their quotas. A tenant without a quota has no limit. Tenants are named by
 * their index in the list given.
 */
export class Ledger {
  /** A ledger of `tenants` (indexed as given) holding nothing. @param {Iterable<Entitlement>} [tenants] */
  constructor(tenants = []) {
    /** The tenants, in index order. @type {Entitlement[]} */
    this.tenants = Array.from(tenants);
    /** @private @type {number[]} */
    this.heldBy = this.tenants.map(() => 0);
    /** @private Per cohort: its name, the sum of its members' quotas, what those members hold. @type {{ name: string, quotas: number, holds: number }[]} */
    this.cohorts = [];
    /** @private Per tenant, its cohort's index in `cohorts`. @type {(number | null)[]} */
    this.cohortOf = this.tenants.map((t) => {
      if (t.cohort === null) return null;
      let i = this.cohorts.findIndex((c) => c.name === t.cohort);
      if (i < 0) i = this.cohorts.push({ name: t.cohort, quotas: 0, holds: 0 }) - 1;
      this.cohorts[i].quotas += t.quota ?? 0;
      return i;
    });
  }

  /** Whether any tenant has a limit: when none has, every check passes. */
  limitsAnything() {
    return this.tenants.some((t) => t.quota !== null);
  }

  /** @private @param {number} tenant */
  known(tenant) {
    return Number.isInteger(tenant) && tenant >= 0 && tenant < this.tenants.length;
  }

  /** The GPUs `tenant`'s running jobs hold (0 for an unknown tenant). @param {number} tenant */
  held(tenant) {
    return this.known(tenant) ? this.heldBy[tenant] : 0;
  }

  /**
   * How many more GPUs `tenant` may take; null when no limit applies (no quota, or an unknown
   * tenant).
   * @param {number} tenant @returns {number | null}
   */
  room(tenant) {
    if (!this.known(tenant) || this.tenants[tenant].quota === null) return null;
    const limit = tenantLimit(this.tenants[tenant]);
    const own = limit === null ? null : Math.max(limit - this.heldBy[tenant], 0);
    const c = this.cohortOf[tenant];
    const cohort = c === null ? null : Math.max(this.cohorts[c].quotas - this.cohorts[c].holds, 0);
    if (own !== null && cohort !== null) return Math.min(own, cohort);
    return own ?? cohort;
  }

  /** Throws {@link OverLimit} when `tenant` may not take `gpus` more. @param {number} tenant @param {number} gpus */
  check(tenant, gpus) {
    if (!this.known(tenant) || gpus === 0) return;
    const t = this.tenants[tenant];
    if (t.quota === null) return;
    const holds = this.heldBy[tenant];
    const limit = tenantLimit(t);
    if (limit !== null && holds + gpus > limit) {
      throw new OverLimit("Tenant", { tenant: t.name, holds, asks: gpus, limit, quota: t.quota });
    }
    const c = this.cohortOf[tenant];
    if (c !== null) {
      const cohort = this.cohorts[c];
      if (cohort.holds + gpus > cohort.quotas) {
        throw new OverLimit("Cohort", { tenant: t.name, cohort: cohort.name, holds: cohort.holds, asks: gpus, quotas: cohort.quotas });
      }
    }
  }

  /** Count `gpus` more held by `tenant` (an unknown tenant is ignored). @param {number} tenant @param {number} gpus */
  hold(tenant, gpus) {
    this.shift(tenant, gpus);
  }

  /** Count `gpus` fewer held by `tenant` (never below zero). @param {number} tenant @param {number} gpus */
  release(tenant, gpus) {
    this.shift(tenant, -gpus);
  }

  /** @private @param {number} tenant @param {number} gpus */
  shift(tenant, gpus) {
    if (!this.known(tenant)) return;
    this.heldBy[tenant] = Math.max(this.heldBy[tenant] + gpus, 0);
    const c = this.cohortOf[tenant];
    if (this.tenants[tenant].quota !== null && c !== null) this.cohorts[c].holds = Math.max(this.cohorts[c].holds + gpus, 0);
  }
}

/** Each problem's text, as the host's `Display` writes it. @type {Record<string, (f: any) => string>} */
const TEXTS = {
  NoSuchJob: (f) => `job ${f.job} does not exist or has ended`,
  AlreadyMoved: (f) => `job ${f.job} was already placed, preempted or stopped by this decision`,
  Queued: (f) => `job ${f.job} is queued, not running: place it first`,
  CpuBelowMinimum: (f) =>
    `a CPU limit of ${f.millicores} millicores is below the minimum of ${MIN_CPU_MILLICORES}; lift the limit or give more`,
  CpuAboveNode: (f) => `a CPU limit of ${f.millicores} millicores is more than node ${f.node} has (${f.has})`,
  MemoryBelowMinimum: (f) => `a memory limit of ${f.bytes} bytes is below the minimum of ${MIN_MEMORY_BYTES}`,
  MemoryAboveNode: (f) => `a memory limit of ${f.bytes} bytes is more than node ${f.node} has (${f.has})`,
  NoSuchNode: (f) => `node ${f.node} does not exist (${f.nodes} nodes)`,
  AlreadyOn: (f) => `job ${f.job} already runs on node ${f.node}`,
  SpansNodes: (f) => `job ${f.job} spans several nodes; preempt it and place it instead`,
  TooFewFreeGpus: (f) => `node ${f.node} has ${f.free} free GPUs; job ${f.job} holds ${f.holds}`,
  NodeFull: (f) => `node ${f.node} is full: ${f.used} of ${f.capacity} bytes in use, the job needs ${f.needs}`,
  NoSuchGpu: (f) => `node ${f.node} has no GPU ${f.gpu} (${f.count} GPUs)`,
  ShareOutOfRange: (f) => `a GPU share of ${f.percent} % is outside 1–100`,
  PlaceRunning: (f) => `job ${f.job} already runs on node ${f.node}; migrate it, or preempt it first`,
  NoNodeNamed: (f) => `the placement of job ${f.job} names no node`,
  TooManyNodes: (f) => `job ${f.job} runs on at most ${f.pieces} node(s) (${f.replicas} replicas); the placement names ${f.named}`,
  NodeTwice: (f) => `the placement names node ${f.node} twice`,
  TooManyGpus: (f) => `node ${f.node} has ${f.count} GPUs; the placement asks for ${f.asked}`,
  NotWholeReplicas: (f) =>
    `each node of a spread placement takes whole replicas of ${f.perPiece} GPU(s); node ${f.node} gets ${f.got}`,
  GpuTwice: (f) => `the placement names GPU ${f.gpu} of node ${f.node} twice`,
  GpuHeld: (f) => `GPU ${f.gpu} of node ${f.node} is held by job ${f.holder}; name a free GPU, or place with share`,
  WrongGpuCount: (f) => `job ${f.job} asks for ${f.asks} GPUs; the placement gives ${f.given}`,
  NodeDown: (f) => `node ${f.node} cannot take work now (NotReady or cordoned)`,
  // A list as Rust's `{:?}` writes it: `[1, 2, 4]`.
  CountNotAllowed: (f) => `job ${f.job} runs on [${f.counts.join(", ")}] GPUs (its scaling); the placement gives ${f.given}`,
  BatchOutOfRange: (f) =>
    f.min === 0 && f.max === 0
      ? `job ${f.job} has no batch size the host sets; the resize asks for ${f.batchSize}`
      : `job ${f.job} accepts batch sizes ${f.min}–${f.max}; the resize asks for ${f.batchSize}`,
  EmptyEntry: (f) => `the resize names node ${f.node} with no GPU; leave it out`,
  // `over` is the OverLimit: its text is the problem's.
  OverTenantLimit: (f) => f.over.message,
};

/** Why an action is refused: `kind` names the case (as the Rust `Problem` variant), `message` is the host's text. */
export class Problem extends Error {
  /** @param {string} kind @param {Record<string, unknown>} fields */
  constructor(kind, fields) {
    super(TEXTS[kind](fields));
    this.name = "Problem";
    this.kind = kind;
    this.fields = fields;
  }
}

/** Why a whole decision is refused: it holds more than any decision for its world could need; its message is the host's words. */
export class Oversized extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "Oversized";
  }
}

/**
 * @typedef {object} Room How much a decision may hold for the world it was made for ({@link size}).
 * @property {number} jobs live jobs, running and queued
 * @property {number} queued queued jobs: no decision places more
 * @property {number} nodes nodes: no placement names more node entries
 * @property {number} gpusPerNode the most GPUs any node has: no node entry names more
 */

/**
 * Throws {@link Oversized} for a decision (its actions' kinds) larger than any decision for a
 * world of `room` could need: more actions than {@link maxActions}, more placements than
 * queued jobs, a placement or resize naming more node entries than there are nodes, or a node
 * entry more GPUs than any node has. Counts lengths only, and stops at the first excess.
 * @param {{ tag: string, val?: any }[]} kinds @param {Room} room
 */
export function size(kinds, room) {
  const limit = maxActions(room.jobs);
  if (kinds.length > limit) {
    throw new Oversized(`decision has ${kinds.length} actions; at most ${limit} are accepted for ${room.jobs} jobs`);
  }
  let placements = 0;
  kinds.forEach((kind, i) => {
    let entries;
    if (kind.tag === "place") {
      placements += 1;
      if (placements > room.queued) throw new Oversized(`decision places ${placements} jobs; ${room.queued} are queued`);
      entries = kind.val.nodes;
    } else if (kind.tag === "resize") {
      entries = kind.val.placement.nodes;
    } else {
      return;
    }
    if (entries.length > room.nodes) {
      throw new Oversized(`action ${i} places on ${entries.length} node entries; the cluster has ${room.nodes} nodes`);
    }
    for (const entry of entries) {
      if (entry.gpus.length > room.gpusPerNode) {
        throw new Oversized(
          `action ${i} names ${entry.gpus.length} GPUs of one node; no node has more than ${room.gpusPerNode}`,
        );
      }
    }
  });
}

/**
 * @typedef {object} NodeCap A node's capacity, as the checks need it.
 * @property {string} name
 * @property {number} cpu millicores
 * @property {number} memory bytes
 * @property {number} gpus how many GPUs it has
 * @property {boolean} down whether it cannot take work now: nothing is placed, moved or resized onto it
 */

/**
 * @typedef {object} JobNow A live job, as the checks need it.
 * @property {number} gpus the GPUs it asks for
 * @property {number} replicas into how many pieces it may be split, as declared
 * @property {number | null} node where it runs (its first node); null while queued
 * @property {number} memoryUsed bytes
 * @property {number[]} gpuCounts the GPU counts it can run on, ascending (a rigid job: its `gpus` alone)
 * @property {[number, number]} batchSizes the global batch sizes it accepts, [min, max]; [0, 0]: none to set
 * @property {number | null} [tenant] its tenant's index in the checker's {@link Ledger}; null: no tenant limits it
 */

/**
 * @typedef {object} World What the checks read of the world a decision was made for.
 * @property {(node: number) => NodeCap | null} node
 * @property {() => number} nodeCount
 * @property {(job: number) => JobNow | null} job a live job
 * @property {(job: number) => [number, number][]} gpusOf the GPUs a running job holds, as [node, index]
 * @property {(node: number) => number} memoryUsedOn the memory the jobs running on `node` use
 */

/** Checks a decision's actions in order, against the world as the accepted ones leave it. */
export class Checker {
  /** Start on a world whose GPUs are held as `book` says (every running job's), with no tenant limits. @param {GpuBook} book */
  constructor(book) {
    /** The GPUs as the accepted actions so far leave them. */
    this.book = book;
    /** What each tenant holds as the accepted actions so far leave it. */
    this.ledger = new Ledger();
    /** @private @type {Set<number>} */
    this.moved = new Set();
  }

  /**
   * Hold tenants to their limits, from what `ledger` says they hold now (every running job's
   * GPUs, counted to its tenant).
   * @param {Ledger} ledger
   */
  withTenants(ledger) {
    this.ledger = ledger;
    return this;
  }

  /**
   * Check `kind` on `job` (throws {@link Problem}); when it passes, the world moves on as it
   * says (a placement takes its GPUs, a preemption or a stop frees them, a resize does both).
   * @param {World} world @param {number} job @param {ActionKind} kind
   */
  check(world, job, kind) {
    this.problem(world, job, kind);
    const tag = kind.tag;
    if (tag !== "place" && tag !== "preempt" && tag !== "stop" && tag !== "resize") return;
    const tenant = world.job(job)?.tenant ?? null;
    const freed = tag === "place" ? [] : world.gpusOf(job);
    for (const [node, index] of freed) this.book.release(node, index, job);
    const taken = kind.tag === "place" ? kind.val.nodes : kind.tag === "resize" ? kind.val.placement.nodes : [];
    for (const entry of taken) for (const index of entry.gpus) this.book.hold(entry.node, index, job);
    if (tenant !== null) {
      this.ledger.release(tenant, freed.length);
      this.ledger.hold(tenant, taken.reduce((n, e) => n + e.gpus.length, 0));
    }
    this.moved.add(job);
  }

  /**
   * Why `job`'s tenant may not go from the GPUs it holds to those `nodes` name.
   * @private @param {World} world @param {number} job @param {JobNow} now @param {{ node: number, gpus: number[] }[]} nodes
   */
  tenantRoom(world, job, now, nodes) {
    const tenant = now.tenant ?? null;
    if (tenant === null) return;
    const taken = nodes.reduce((n, e) => n + e.gpus.length, 0);
    const held = now.node !== null ? world.gpusOf(job).length : 0;
    try {
      this.ledger.check(tenant, Math.max(taken - held, 0));
    } catch (e) {
      if (e instanceof OverLimit) throw new Problem("OverTenantLimit", { over: e });
      throw e;
    }
  }

  /** @private @param {World} world @param {number} job @param {ActionKind} kind */
  problem(world, job, kind) {
    const now = world.job(job);
    if (now === null) throw new Problem("NoSuchJob", { job });
    if (this.moved.has(job)) throw new Problem("AlreadyMoved", { job });
    const on = now.node;
    if (on === null) {
      if (kind.tag === "place") {
        this.placement(world, job, now, kind.val.nodes, kind.val.share);
        this.tenantRoom(world, job, now, kind.val.nodes);
      } else if (kind.tag !== "stop") throw new Problem("Queued", { job });
      return;
    }
    const nodes = world.nodeCount();
    const node = world.node(on);
    if (node === null) throw new Problem("NoSuchNode", { node: on, nodes });
    switch (kind.tag) {
      case "set-cpu": {
        const m = kind.val;
        if (m !== null && m < MIN_CPU_MILLICORES) throw new Problem("CpuBelowMinimum", { millicores: m });
        if (m !== null && m > node.cpu) throw new Problem("CpuAboveNode", { millicores: m, node: node.name, has: node.cpu });
        return;
      }
      case "set-memory": {
        const b = kind.val;
        if (b !== null && b < MIN_MEMORY_BYTES) throw new Problem("MemoryBelowMinimum", { bytes: b });
        if (b !== null && b > node.memory) throw new Problem("MemoryAboveNode", { bytes: b, node: node.name, has: node.memory });
        return;
      }
      case "migrate": {
        const to = kind.val;
        const dest = world.node(to);
        if (dest === null) throw new Problem("NoSuchNode", { node: to, nodes });
        if (dest.down) throw new Problem("NodeDown", { node: dest.name });
        if (to === on) throw new Problem("AlreadyOn", { job, node: dest.name });
        const held = world.gpusOf(job);
        if (held.some(([n]) => n !== on)) throw new Problem("SpansNodes", { job });
        const free = this.book.freeCount(to);
        if (free < held.length) throw new Problem("TooFewFreeGpus", { node: dest.name, free, job, holds: held.length });
        const used = world.memoryUsedOn(to);
        if (used + now.memoryUsed > dest.memory) {
          throw new Problem("NodeFull", { node: dest.name, used, capacity: dest.memory, needs: now.memoryUsed });
        }
        return;
      }
      case "set-gpu-share": {
        const { gpu, percent } = kind.val;
        if (gpu >= node.gpus) throw new Problem("NoSuchGpu", { node: node.name, gpu, count: node.gpus });
        if (percent === 0 || percent > 100) throw new Problem("ShareOutOfRange", { percent });
        return;
      }
      case "place":
        throw new Problem("PlaceRunning", { job, node: node.name });
      case "resize": {
        const batchSize = kind.val.batchSize;
        if (batchSize !== null) {
          const [min, max] = now.batchSizes;
          if (batchSize < min || batchSize > max || max === 0) throw new Problem("BatchOutOfRange", { job, batchSize, min, max });
        }
        this.elasticEntries(world, job, now, kind.val.placement.nodes, kind.val.placement.share);
        this.tenantRoom(world, job, now, kind.val.placement.nodes);
        return;
      }
      default:
        return;
    }
  }

  /**
   * Why queued job `job` cannot start where `nodes` say, if it cannot.
   * @private @param {World} world @param {number} job @param {JobNow} now
   * @param {{ node: number, gpus: number[] }[]} nodes @param {boolean} share
   */
  placement(world, job, now, nodes, share) {
    const pieces = Math.max(now.replicas, 1);
    if (nodes.length === 0) throw new Problem("NoNodeNamed", { job });
    if (now.gpuCounts.length > 1) {
      // An elastic job starts on any of its counts, spread as a resize spreads it.
      this.elasticEntries(world, job, now, nodes, share);
      return;
    }
    if (nodes.length > pieces) throw new Problem("TooManyNodes", { job, pieces, replicas: now.replicas, named: nodes.length });
    this.entries(world, job, nodes, share, gpusPerPiece(now.gpus, now.replicas));
    const given = nodes.reduce((n, e) => n + e.gpus.length, 0);
    if (given !== now.gpus) throw new Problem("WrongGpuCount", { job, asks: now.gpus, given });
  }

  /**
   * Why `job` cannot run on the GPUs `nodes` name as an elastic job starts or is resized: a
   * total among its counts, each node named with at least one GPU (and {@link Checker#entries}).
   * @private @param {World} world @param {number} job @param {JobNow} now
   * @param {{ node: number, gpus: number[] }[]} nodes @param {boolean} share
   */
  elasticEntries(world, job, now, nodes, share) {
    const given = nodes.reduce((n, e) => n + e.gpus.length, 0);
    if (!now.gpuCounts.includes(given)) throw new Problem("CountNotAllowed", { job, given, counts: [...now.gpuCounts] });
    this.entries(world, job, nodes, share, null);
  }

  /**
   * Why `job` cannot have the GPUs `nodes` name: each node exists, can take work and is named
   * once, each GPU exists, is named once and is free (or `share`, or held by `job` itself, which
   * a resize gives up). A placement's spread entries hold whole replicas of `perPiece` GPUs; a
   * resize's (`perPiece` null) at least one GPU each.
   * @private @param {World} world @param {number} job @param {{ node: number, gpus: number[] }[]} nodes
   * @param {boolean} share @param {number | null} perPiece
   */
  entries(world, job, nodes, share, perPiece) {
    if (nodes.length === 0) throw new Problem("NoNodeNamed", { job });
    nodes.forEach((entry, k) => {
      const node = world.node(entry.node);
      if (node === null) throw new Problem("NoSuchNode", { node: entry.node, nodes: world.nodeCount() });
      if (node.down) throw new Problem("NodeDown", { node: node.name });
      if (nodes.slice(0, k).some((e) => e.node === entry.node)) throw new Problem("NodeTwice", { node: node.name });
      const gpus = entry.gpus;
      if (gpus.length > node.gpus) throw new Problem("TooManyGpus", { node: node.name, count: node.gpus, asked: gpus.length });
      if (nodes.length > 1 && perPiece !== null && (gpus.length === 0 || gpus.length % perPiece !== 0)) {
        throw new Problem("NotWholeReplicas", { perPiece, node: node.name, got: gpus.length });
      }
      if (nodes.length > 1 && perPiece === null && gpus.length === 0) throw new Problem("EmptyEntry", { node: node.name });
      gpus.forEach((index, g) => {
        if (index >= node.gpus || !this.book.exists(entry.node, index)) {
          throw new Problem("NoSuchGpu", { node: node.name, gpu: index, count: node.gpus });
        }
        if (gpus.slice(0, g).includes(index)) throw new Problem("GpuTwice", { gpu: index, node: node.name });
        const other = this.book.holders(entry.node, index).find((h) => h !== job);
        if (other !== undefined && !share) throw new Problem("GpuHeld", { gpu: index, node: node.name, holder: other });
      });
    });
  }
}

/** A snapshot, as the rules read it. @param {Snapshot} s @returns {World} */
function seen(s) {
  return {
    node(n) {
      const node = s.node(n);
      return node === null
        ? null
        : { name: node.name, cpu: node.cpu, memory: node.memory, gpus: node.gpuCount, down: !node.takesWork };
    },
    nodeCount: () => s.nodes().length,
    job(j) {
      const job = s.job(j);
      if (job === null) return null;
      // The declared replicas, 0 included: the host's texts name the declared number.
      const replicas = /** @type {any} */ (job)._e.spec.replicas;
      const { gpuCounts, batchSizeMin, batchSizeMax } = job.scaling;
      return {
        gpus: job.gpusAsked,
        replicas,
        node: job.isQueued ? null : job.node,
        memoryUsed: job.memoryUse,
        gpuCounts,
        batchSizes: [batchSizeMin, batchSizeMax],
        tenant: s.tenantIndex(job.tenant),
      };
    },
    gpusOf(j) {
      const job = s.job(j);
      return job === null ? [] : job.gpus.map((g) => /** @type {[number, number]} */ ([g.node, g.index]));
    },
    memoryUsedOn: (n) => s.jobsOn(n).reduce((sum, j) => sum + j.memoryUse, 0),
  };
}

/** Who holds each GPU: every running job its GPUs, in handle order. @param {Snapshot} s */
function bookOf(s) {
  const book = new GpuBook(s.nodes().map((n) => n.gpuCount));
  for (const job of s.jobs()) for (const g of job.gpus) book.hold(g.node, g.index, job.id);
  return book;
}

/**
 * What the host's validation makes of each action of `decision`, made on `snapshot`, in order:
 * null when it is accepted, else the {@link Problem} (its message is the host's words); a
 * refused action changes nothing for the actions after it. Throws {@link Oversized} when the
 * decision is refused whole for its size.
 * @param {Snapshot} snapshot @param {Decision} decision @returns {(Problem | null)[]}
 */
export function verdicts(snapshot, decision) {
  const nodes = snapshot.nodes();
  size(
    decision.actions.map((a) => a.kind),
    {
      jobs: snapshot.jobCount + snapshot.queueLength,
      queued: snapshot.queueLength,
      nodes: nodes.length,
      gpusPerNode: nodes.reduce((most, n) => Math.max(most, n.gpuCount), 0),
    },
  );
  const world = seen(snapshot);
  const checker = new Checker(bookOf(snapshot)).withTenants(snapshot.ledger());
  return decision.actions.map((action) => {
    try {
      checker.check(world, action.job, action.kind);
      return null;
    } catch (e) {
      if (e instanceof Problem) return e;
      throw e;
    }
  });
}

/**
 * Whether the host would accept every action of `decision`, made on `snapshot`: null when it
 * would, else the first problem as `action N: ` and the host's words (the host's words alone for
 * a decision too large). Policy tests run it on every decision.
 * @param {Snapshot} snapshot @param {Decision} decision @returns {string | null}
 */
export function check(snapshot, decision) {
  let found;
  try {
    found = verdicts(snapshot, decision);
  } catch (e) {
    if (e instanceof Oversized) return e.message;
    throw e;
  }
  const i = found.findIndex((p) => p !== null);
  return i < 0 ? null : `action ${i}: ${found[i]?.message}`;
}
