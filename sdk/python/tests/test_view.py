"""The typed views' derived numbers: windows, progress rate, growth efficiency."""

from __future__ import annotations

import math

import pytest

from wasmsched import Decision, Direction, Policy, Runner, gib
from wasmsched.testing import TestWorld, job


class Inspect(Policy):
    def decide(self, snapshot):
        return Decision()


def accuracy_run(cpu_use: int = 0):
    w = TestWorld()
    w.node("n0", 8000, gib(16))
    a = w.add_job(job("a", "cifar10").metric("accuracy", Direction.HIGHER_IS_BETTER))
    r = Runner(Inspect())
    for epoch, acc in [(1, 0.2), (2, 0.4), (3, 0.5), (4, 0.6)]:
        w.advance(15.0)
        w.report(a, epoch, [acc])
    w.set_cpu_use(a, cpu_use)
    r.decide(w.snapshot())
    return r.view().job(a)


def test_progress_rate_compares_two_windows_of_the_normalised_metric():
    j = accuracy_run()
    # Windows (0, 30] and (30, 60]: means 0.3 and 0.55 → 0.25 / 30 s.
    rate = j.progress_rate(60.0, 30.0)
    assert abs(rate - 0.25 / 30.0) < 1e-12
    assert j.progress_rate(60.0, 60.0) is None
    assert j.window_mean(0.0, 30.0) == pytest.approx(0.3)
    assert j.window_mean(60.0, 90.0) is None


def test_growth_efficiency_is_per_minute_per_node_fraction_and_zero_without_cpu():
    assert accuracy_run(cpu_use=0).growth_efficiency(60.0, 30.0, 8000) == 0.0
    j = accuracy_run(cpu_use=2000)
    # 0.25/30 per second is 0.5 per minute, over a quarter of the node.
    assert j.growth_efficiency(60.0, 30.0, 8000) == pytest.approx(2.0)
    assert j.growth_efficiency(60.0, 60.0, 8000) == 0.0, "one window empty"


def test_a_lower_is_better_metric_is_normalised_by_the_largest_seen_and_nan_skipped():
    w = TestWorld()
    w.node("n0", 8000, gib(16))
    a = w.add_job(job("a", "ncf").metric("loss", Direction.LOWER_IS_BETTER).metric("acc"))
    for i, v in enumerate([2.0, 1.0, math.nan, 4.0, 1.0]):
        w.advance(1.0)
        w.report(a, i, [v, 0.5])
    r = Runner(Inspect())
    r.decide(w.snapshot())
    j = r.view().job(a)
    assert [v for _, v in j.normalised()] == [1.0, 0.5, 1.0, 0.25]
    assert [t for t, _ in j.normalised()] == [1.0, 2.0, 4.0, 5.0]
    assert j.direction is Direction.LOWER_IS_BETTER
    assert [m.name for m in j.metrics] == ["loss", "acc"]


def test_a_job_without_metrics_is_higher_is_better_and_has_no_records():
    w = TestWorld()
    w.node("n0", 8000, gib(16))
    a = w.add_job(job("a", "ncf").max_epochs(3).label("k", "v"))
    r = Runner(Inspect())
    r.decide(w.snapshot())
    j = r.view().job(a)
    assert j.direction is Direction.HIGHER_IS_BETTER
    assert (j.latest, j.epoch, j.max_epochs, j.label("k")) == (None, 0, 3, "v")
    assert j.normalised() == [] and j.progress_rate(30.0, 30.0) is None
    assert j.node == 0 and list(r.view().jobs_on(0))[0].id == a and list(r.view().jobs_on(1)) == []
