"""{{name}}'s tests, natively through the SDK's harness: run ``pytest``."""

from __future__ import annotations

import pytest

from {{module}} import {{type}}
from wasmsched import InvalidConfig, gib
from wasmsched.testing import Harness, TestWorld, job


def test_two_jobs_share_their_node_equally_and_are_then_left_alone():
    world = TestWorld()
    world.node("n0", 8000, gib(16))
    a = world.add_job(job("a", "cifar10"))
    b = world.add_job(job("b", "ncf"))
    h = Harness({{type}}(), world)
    d = h.tick(30.0)
    assert d.cpu_limit_for(a).limit == 4000
    assert d.cpu_limit_for(b).limit == 4000
    # The harness puts the limits into force, as the host would: nothing more to do.
    assert h.tick(30.0).is_empty()


def test_a_config_key_it_does_not_know_is_refused_by_name():
    with pytest.raises(InvalidConfig) as e:
        Harness.from_config({{type}}, '{"min-milicores": 5}')
    assert "min-milicores" in e.value.message
