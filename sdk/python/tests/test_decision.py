"""Actions, decisions and rounds, as sdk/src/decision.rs."""

from __future__ import annotations

import math

from wasmsched import Action, Decision, Place, Rounds, SetCpu, SetGpuShare, SetMemory, Stop


def test_builders_carry_units_and_reasons():
    a = Action.set_cpu(3, 1500).because("growing")
    assert (a.job, a.kind, a.reason) == (3, SetCpu(1500), "growing")
    assert a.cpu_limit == SetCpu(1500)
    assert Action.stop(1).cpu_limit is None and Action.stop(1).kind == Stop()
    assert Action.lift_memory(2).kind == SetMemory(None)
    assert Action.set_gpu_share(4, 1, 50).kind == SetGpuShare(1, 50)
    plain = Action.lift_cpu(5)
    assert plain.because("x") is not plain and plain.reason == "", "because returns a new action"


def test_placements_name_nodes_and_gpus():
    assert Action.place(1, 2, [0, 3]).kind == Place(((2, (0, 3)),), False)
    p = Action.place_on(1, [(0, [1]), (1, [0, 1])], share=True).kind
    assert p.nodes == ((0, (1,)), (1, (0, 1))) and p.share


def test_next_call_crosses_in_milliseconds_rounded_half_away():
    d = Decision().push(Action.lift_cpu(1))
    d.call_again_in(2.5)
    assert (d.next_call_ms, len(d.actions)) == (2500, 1)
    assert Decision().call_again_in(0.0305).next_call_ms == 31
    assert Decision().call_again_in(0.0005).next_call_ms == 1
    assert Decision().call_again_in(-3.0).next_call_ms == 0
    assert Decision().call_again_in(math.nan).next_call_ms == 0
    assert Decision().next_call_ms is None


def test_last_cpu_action_on_a_job_wins():
    d = Decision().push(Action.set_cpu(1, 100)).push(Action.stop(1)).push(Action.lift_cpu(1))
    assert d.cpu_limit_for(1) == SetCpu(None)
    assert d.cpu_limit_for(2) is None
    assert not d.is_empty() and Decision().is_empty()


def test_a_round_is_due_every_interval_and_asks_for_a_call_between():
    r = Rounds()
    d = Decision()
    assert r.due(5.0, 30.0, d), "the first call is a round"
    assert not r.due(20.0, 30.0, d)
    assert d.next_call == 15.0
    assert r.due(35.0, 30.0, Decision())
    r.start(40.0)
    assert not r.due(60.0, 30.0, Decision())
    assert r.due(70.0 - 1e-10, 30.0, Decision()), "1e-9 of slack"


def test_rounds_ride_in_state_as_serde_writes_them():
    assert Rounds().to_json() == {"last_s": None}
    assert Rounds(30.0).to_json() == {"last_s": 30.0}
    assert Rounds.from_json({}) == Rounds(None)
    assert Rounds.from_json({"last_s": 60}) == Rounds(60.0)
