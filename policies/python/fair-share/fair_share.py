"""fair-share: the baseline every result is a ratio against. A port of the Rust policy
(``policies/fair-share/src/lib.rs``) that decides exactly as it does.

Docker's default: no limits, so the kernel's CFS splits the CPU equally among runnable
containers and an idle one's share flows to the others. The policy lifts every CPU and memory
limit it finds and otherwise does nothing. Reads: each job's limits. Config: none.
"""

from __future__ import annotations

from wasmsched import Action, Decision, Policy, Snapshot


class FairShare(Policy):
    """Lifts every limit."""

    def decide(self, s: Snapshot) -> Decision:
        d = Decision()
        for job in s.jobs():
            if job.cpu_limit is not None:
                d.push(Action.lift_cpu(job.id).because("fair-share sets no CPU limit"))
            if job.memory_limit is not None:
                d.push(Action.lift_memory(job.id).because("fair-share sets no memory limit"))
        return d
