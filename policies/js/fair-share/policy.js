// @ts-check
/**
 * fair-share, in JavaScript: the baseline every result is a ratio against.
 *
 * Docker's default: no limits, so the kernel's CFS splits the CPU equally among runnable
 * containers and an idle one's share flows to the others. The policy lifts every CPU and memory
 * limit it finds and otherwise does nothing. Reads: each job's limits. Config: none.
 * The same policy as `policies/fair-share` (Rust); the same decisions, tick for tick.
 */

import { Decision, exportPolicy, liftCpu, liftMemory } from "../../../sdk/js/wasmsched.js";

/** Lifts every limit. */
export class FairShare {
  /** No config keys: an empty table, anything else refused. */
  static config = {};

  /** @param {import("../../../sdk/js/wasmsched.js").Snapshot} s */
  decide(s) {
    const d = new Decision();
    for (const job of s.jobs()) {
      if (job.cpuLimit !== null) d.push(liftCpu(job).because("fair-share sets no CPU limit"));
      if (job.memoryLimit !== null) d.push(liftMemory(job).because("fair-share sets no memory limit"));
    }
    return d;
  }
}

/** The component's `wasmsched:policy/policy` export. */
export const policy = exportPolicy(FairShare);
