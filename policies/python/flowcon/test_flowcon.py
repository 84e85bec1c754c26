"""FlowCon's tests, ported from policies/flowcon/src/lib.rs, and its state against the JSON the
Rust version saves."""

from __future__ import annotations

import pytest

from flowcon import Config, Flag, FlowCon
from wasmsched import Decision, Direction, InvalidConfig, InvalidState, SetCpu, gib
from wasmsched.testing import Harness, TestWorld, job

NODE = 8000
BOTH = [Direction.HIGHER_IS_BETTER, Direction.LOWER_IS_BETTER]


def value(direction: Direction, x: float) -> float:
    """The reported value after normalised progress ``x`` from 0.2: accuracy itself when
    higher is better; a loss falling from 2.0 (so normalised by 2.0) when lower is better."""
    return 0.2 + x if direction is Direction.HIGHER_IS_BETTER else 2.0 * (1.0 - x)


class Rig:
    def __init__(self, direction: Direction, jobs: list[str]) -> None:
        world = TestWorld()
        world.node("n0", NODE, gib(64))
        for name in jobs:
            world.add_job(job(name, "cifar10").metric("m", direction))
        self.h = Harness(FlowCon.new(Config()), world)
        self.h.tick(0.0)  # t = 0: the jobs are seen
        self.direction = direction
        self.round = 0
        self.progress = [0.0] * len(jobs)

    @property
    def policy(self) -> FlowCon:
        return self.h.policy

    def tick(self, steps: list[float]) -> Decision:
        """30 s pass; each job reports, its progress moved by its step, after using 2 cores."""
        self.round += 1
        self.h.world.advance(30.0)
        for i, step in enumerate(steps):
            self.h.world.set_cpu_use(i, 2000)
            self.progress[i] += step
            self.h.world.report(i, self.round, [value(self.direction, self.progress[i])])
        return self.h.tick(0.0)


def limit(d: Decision, job: int) -> SetCpu | None:
    return d.cpu_limit_for(job)


@pytest.mark.parametrize("direction", BOTH)
def test_no_job_is_cut_before_it_has_two_intervals_of_history(direction):
    rig = Rig(direction, ["fast", "flat"])
    rig.h.world.set_cpu_limit(1, 500)
    d = rig.tick([0.3, 0.0])
    assert limit(d, 0) is None, "nothing set on a young job"
    assert limit(d, 1) == SetCpu(None), "a young job's limit is lifted"
    assert d.actions[0].reason == "flowcon: new job, unlimited for its first 2Δ"


@pytest.mark.parametrize("direction", BOTH)
def test_a_slow_job_watches_after_one_round_and_completes_after_two_with_the_floor(direction):
    rig = Rig(direction, ["fast", "flat"])
    rig.tick([0.3, 0.0])  # t = 30: both young
    d = rig.tick([0.3, 0.0])  # t = 60: judged for the first time
    assert rig.policy.flag(1) is Flag.WATCHING
    assert limit(d, 1) is None, "a watching job keeps its limit"
    assert limit(d, 0) == SetCpu(NODE), "the only grower may use the node"
    d = rig.tick([0.3, 0.0])  # t = 90
    assert rig.policy.flag(1) is Flag.COMPLETING
    assert rig.policy.flag(0) is Flag.GROWING
    # G = 0, so its share is the floor 1/(n+1) of the node, in fractional cores.
    assert limit(d, 1) == SetCpu(2667)
    assert [a.reason for a in d.actions if a.job == 1] == ["flowcon: completing, G = 0.0000, 33 % of the node"]


def test_growing_again_clears_the_flags():
    rig = Rig(Direction.HIGHER_IS_BETTER, ["a", "b"])
    rig.tick([0.3, 0.0])
    rig.tick([0.3, 0.0])
    assert rig.policy.flag(1) is Flag.WATCHING
    rig.tick([0.3, 0.3])
    assert rig.policy.flag(1) is Flag.GROWING


def test_growers_split_the_node_by_growth_efficiency():
    rig = Rig(Direction.HIGHER_IS_BETTER, ["a", "b"])
    rig.tick([0.3, 0.9])
    d = rig.tick([0.3, 0.9])
    # Same CPU use, so G is in proportion to progress: a gets 1/4 of the node, b 3/4.
    assert limit(d, 0) == SetCpu(2000)
    assert limit(d, 1) == SetCpu(6000)
    assert [a.reason for a in d.actions] == [
        "flowcon: growing, G = 2.4000, 25 % of the node",
        "flowcon: growing, G = 7.2000, 75 % of the node",
    ]


@pytest.mark.parametrize("direction", BOTH)
def test_when_all_complete_limits_are_lifted_and_the_interval_backs_off_until_a_job_arrives(direction):
    rig = Rig(direction, ["a", "b"])
    rig.tick([0.3, 0.0])
    rig.tick([0.3, 0.0])
    d = rig.tick([0.3, 0.0])
    assert limit(d, 1) is not None and limit(d, 1).limit is not None, "b limited while a grows"
    rig.tick([0.0, 0.0])  # t = 120: a watching
    d = rig.tick([0.0, 0.0])  # t = 150: a completing too
    assert limit(d, 1) == SetCpu(None), "lifted"
    assert rig.policy.interval() == 60.0
    assert d.next_call == 60.0
    d = rig.tick([0.0, 0.0])  # t = 180: not due until 210
    assert d.is_empty() and d.next_call == 30.0
    rig.tick([0.0, 0.0])  # t = 210: still all completing
    assert rig.policy.interval() == 120.0, "4Δ"
    rig.h.world.add_job(job("c", "ncf").metric("m", direction))
    d = rig.tick([0.0, 0.0])  # t = 240: a job started: a round now, back to Δ
    assert rig.policy.interval() == 30.0
    assert d.next_call == 30.0


def test_inference_services_are_left_alone():
    world = TestWorld()
    world.node("n0", NODE, gib(64))
    s = world.add_job(job("api", "bert").inference().metric("latency-ms", Direction.LOWER_IS_BETTER))
    world.set_cpu_limit(s, 700)
    h = Harness(FlowCon.new(Config()), world)
    for _ in range(5):
        d = h.tick(30.0)
        assert d.actions == []
    assert h.policy.flag(s) is None


def test_state_survives_a_swap():
    rig = Rig(Direction.HIGHER_IS_BETTER, ["a", "b"])
    rig.tick([0.3, 0.0])
    rig.tick([0.3, 0.0])
    saved = rig.h.runner.save_state()
    assert saved == b'{"flags":{"0":"Growing","1":"Watching"},"rounds":{"last_s":60.0},"backoff":1,"jobs":[0,1]}'
    newer = FlowCon.new(Config())
    newer.restore_state(saved)
    assert newer.flag(1) is Flag.WATCHING


def test_state_saved_by_the_rust_version_is_taken_and_written_back_the_same():
    # Saved by policies/flowcon (Rust, serde_json) on scenarios/two-nodes.toml, seed 0.
    rust = b'{"flags":{"0":"Completing","1":"Completing","3":"Completing","4":"Completing","6":"Completing",' \
        b'"7":"Completing"},"rounds":{"last_s":810.0},"backoff":2,"jobs":[0,1,2,3,4,6,7]}'
    p = FlowCon.new(Config())
    p.restore_state(rust)
    assert (p.flag(6), p.state.backoff, p.state.rounds.last_s, p.interval()) == (Flag.COMPLETING, 2, 810.0, 60.0)
    assert p.save_state() == rust
    p.restore_state(b'{"flags":{},"rounds":{},"backoff":0,"jobs":[],"later":1}')
    assert p.state.rounds.last_s is None and p.interval() == 30.0, "a missing Option is None; unknown keys pass"


@pytest.mark.parametrize(
    "saved",
    [
        b"[]",
        b'{"flags":{},"rounds":{"last_s":1.0},"backoff":1}',
        b'{"flags":{"x":"Growing"},"rounds":{},"backoff":1,"jobs":[]}',
        b'{"flags":{"1":"Sleeping"},"rounds":{},"backoff":1,"jobs":[]}',
        b'{"flags":{},"rounds":{},"backoff":-1,"jobs":[]}',
        b'{"flags":{},"rounds":{},"backoff":1,"jobs":[1.5]}',
        b"\xff",
    ],
)
def test_a_broken_state_is_refused(saved):
    with pytest.raises(InvalidState):
        FlowCon.new(Config()).restore_state(saved)


def test_a_bad_config_is_refused():
    with pytest.raises(InvalidConfig) as e:
        Harness.from_config(FlowCon, '{"interval-s": 0}')
    assert e.value.message == "interval-s must be positive, alpha zero or more, max-backoff at least 1"
    with pytest.raises(InvalidConfig, match="max-backoff at least 1"):
        Harness.from_config(FlowCon, '{"max-backoff": 0}')
    with pytest.raises(InvalidConfig, match="unknown field `beta`"):
        Harness.from_config(FlowCon, '{"beta": 1}')
    h = Harness.from_config(FlowCon, '{"alpha": 0.05, "min-limit-millicores": 100}')
    assert (h.policy.config.alpha, h.policy.config.min_limit_millicores, h.policy.config.interval_s) == (0.05, 100, 30.0)
