"""{{name}}: a wasmsched scheduling policy.

It starts as an equal share: each node's CPU is split evenly among the training jobs running
there, never below ``min-millicores``. Make ``decide`` yours; ``pytest`` runs the tests beside
it natively, without building a component.

Config (kebab-case keys, all optional): ``min-millicores`` (100), the smallest cap set.

State kept between calls lives on the policy object (the SDK keeps that object at module
level inside the component, where each exported call gets a fresh ``self``).
"""

from __future__ import annotations

from dataclasses import dataclass

from wasmsched import U64, Action, Decision, JobKind, Policy, Snapshot


@dataclass
class Config:
    """The policy's constants, from its config table."""

    #: No job is capped below this.
    min_millicores: U64 = 100


class {{type}}(Policy):
    """The policy."""

    Config = Config

    def __init__(self, config: Config | None = None) -> None:
        self.config = config if config is not None else Config()

    def decide(self, s: Snapshot) -> Decision:
        d = Decision()
        for node in s.nodes():
            jobs = [j for j in s.jobs_on(node.id) if j.kind is JobKind.TRAINING]
            if not jobs:
                continue
            share = max(node.cpu // len(jobs), self.config.min_millicores)
            for job in jobs:
                if job.cpu_limit != share:
                    d.push(Action.set_cpu(job.id, share).because(f"an equal share of {node.name}"))
        return d
