"""fair-share's tests, ported from policies/fair-share/src/lib.rs."""

from __future__ import annotations

import pytest

from fair_share import FairShare
from wasmsched import InvalidConfig, SetMemory, gib
from wasmsched.testing import Harness, TestWorld, job


def test_lifts_a_cpu_limit_it_finds_and_then_leaves_the_job_alone():
    world = TestWorld()
    world.node("n0", 4000, gib(8))
    a = world.add_job(job("a", "cifar10"))
    b = world.add_job(job("b", "ncf"))
    world.set_cpu_limit(a, 500)
    h = Harness(FairShare(), world)
    d = h.tick(30.0)
    assert len(d.actions) == 1
    assert d.cpu_limit_for(a).limit is None
    assert d.cpu_limit_for(b) is None
    assert d.actions[0].reason == "fair-share sets no CPU limit"
    assert h.tick(30.0).is_empty()


def test_lifts_a_memory_limit_after_the_cpu_limit_of_the_same_job():
    world = TestWorld()
    world.node("n0", 4000, gib(8))
    a = world.add_job(job("a", "cifar10"))
    world.set_cpu_limit(a, 500)
    world.set_memory_limit(a, gib(1))
    d = Harness(FairShare(), world).tick(30.0)
    assert [(x.job, x.reason) for x in d.actions] == [
        (a, "fair-share sets no CPU limit"),
        (a, "fair-share sets no memory limit"),
    ]
    assert d.actions[1].kind == SetMemory(None)
    assert d.next_call is None, "asked every tick"


def test_refuses_a_config_with_keys_it_does_not_know():
    with pytest.raises(InvalidConfig) as e:
        Harness.from_config(FairShare, '{"alpha":1}')
    assert "alpha" in e.value.message
    assert isinstance(Harness.from_config(FairShare, "").policy, FairShare)
