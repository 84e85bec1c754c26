// @ts-check
/**
 * {{name}}: a wasmsched scheduling policy.
 *
 * It starts as an equal share: each node's CPU is split evenly among the training jobs running
 * there, never below `min-millicores`. Make `decide` yours; `npm test` runs the tests in
 * policy.test.js natively, without building a component.
 *
 * Config (keys, all optional): `min-millicores` (100), the smallest cap set.
 */

import { Decision, exportPolicy, setCpu } from "./sdk/wasmsched.js";

/** The policy. */
export class {{type}} {
  /** Its config keys and their defaults. */
  static config = { "min-millicores": 100 };

  /** @param {{ "min-millicores": number }} config */
  constructor(config) {
    this.minMillicores = config["min-millicores"];
  }

  /** @param {import("./sdk/wasmsched.js").Snapshot} s */
  decide(s) {
    const d = new Decision();
    for (const node of s.nodes()) {
      const jobs = s.jobsOn(node.id).filter((j) => j.kind === "training");
      if (jobs.length === 0) continue;
      const share = Math.max(Math.floor(node.cpu / jobs.length), this.minMillicores);
      for (const job of jobs) {
        if (job.cpuLimit !== share) d.push(setCpu(job, share).because(`an equal share of ${node.name}`));
      }
    }
    return d;
  }
}

/** The component's `wasmsched:policy/policy` export. */
export const policy = exportPolicy({{type}});
