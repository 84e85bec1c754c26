"""stats.py mirrors sdk/src/stats.rs; numeric.py mirrors Rust's rounding and formatting."""

from __future__ import annotations

import math

import pytest

from wasmsched import Direction
from wasmsched.numeric import as_u64, fmax, fmin, fmt_fixed, round_half_away, sum_left
from wasmsched.stats import Normaliser, growth_efficiency, growth_rate, proportional_split, reaches, window_mean


def close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-6


def test_lower_is_better_values_are_divided_by_the_largest_seen():
    n = Normaliser(Direction.LOWER_IS_BETTER)
    assert [n.push(x) for x in (2.0, 1.0, 4.0, 1.0, math.nan)] == [1.0, 0.5, 1.0, 0.25, None]
    z = Normaliser(Direction.LOWER_IS_BETTER)
    assert z.push(0.0) is None and z.push(-1.0) is None


def test_higher_is_better_values_pass_as_they_are():
    n = Normaliser(Direction.HIGHER_IS_BETTER)
    assert (n.push(0.42), n.push(0.9), n.push(math.inf)) == (0.42, 0.9, None)


def test_a_target_is_reached_from_either_side_by_direction():
    assert reaches(Direction.HIGHER_IS_BETTER, 0.9, 0.85) and not reaches(Direction.HIGHER_IS_BETTER, 0.8, 0.85)
    assert reaches(Direction.LOWER_IS_BETTER, 25.0, 30.0) and not reaches(Direction.LOWER_IS_BETTER, 31.0, 30.0)
    assert reaches(Direction.LOWER_IS_BETTER, 30.0, 30.0)


def test_window_mean_takes_samples_after_from_up_to_and_including_to():
    s = [(0.0, 1.0), (10.0, 2.0), (20.0, 4.0), (30.0, 8.0), (25.0, math.nan)]
    assert window_mean(s, 0.0, 20.0) == 3.0
    assert window_mean(s, 30.0, 60.0) is None


def test_growth_is_the_same_whichever_way_the_metric_moves():
    assert close(growth_rate(0.5, 0.8, 10.0), 0.03)
    assert close(growth_rate(0.8, 0.5, 10.0), 0.03)
    assert growth_rate(0.5, 0.8, 0.0) == 0.0


def test_a_job_using_no_cpu_has_no_growth_efficiency():
    assert growth_efficiency(0.5, 0.0) == 0.0
    assert growth_efficiency(math.nan, 0.5) == 0.0
    assert close(growth_efficiency(0.03, 0.5), 0.06)


def test_split_is_proportional_when_no_bound_binds():
    s = proportional_split(8.0, [1.0, 3.0], [0.0, 0.0], [8.0, 8.0])
    assert close(s[0], 2.0) and close(s[1], 6.0)


def test_split_lifts_small_shares_to_their_floor_and_takes_it_from_the_rest():
    s = proportional_split(10.0, [1.0, 99.0], [2.0, 0.0], [10.0, 10.0])
    assert close(s[0], 2.0) and close(s[1], 8.0)


def test_split_caps_large_shares_and_gives_the_excess_to_the_rest():
    s = proportional_split(10.0, [9.0, 1.0], [0.0, 0.0], [4.0, 10.0])
    assert close(s[0], 4.0) and close(s[1], 6.0)


def test_split_scales_floors_down_when_they_exceed_the_total():
    s = proportional_split(3.0, [1.0, 1.0], [2.0, 4.0], [10.0, 10.0])
    assert close(s[0], 1.0) and close(s[1], 2.0)


def test_split_with_only_zero_weights_is_equal():
    s = proportional_split(6.0, [0.0, 0.0, math.nan], [0.0] * 3, [6.0] * 3)
    assert all(close(x, 2.0) for x in s)


def test_split_leaves_the_rest_unallocated_when_every_cap_binds():
    assert proportional_split(10.0, [1.0, 1.0], [0.0, 0.0], [1.0, 2.0]) == [1.0, 2.0]
    assert proportional_split(0.0, [1.0], [0.0], [1.0]) == [0.0]
    with pytest.raises(ValueError):
        proportional_split(1.0, [1.0], [], [1.0])


def test_round_half_away_from_zero_as_f64_round():
    assert [round_half_away(x) for x in (0.5, 1.5, 2.5, -0.5, -2.5, 2.4999)] == [1.0, 2.0, 3.0, -1.0, -3.0, 2.0]
    assert round_half_away(0.49999999999999994) == 0.0, "no x + 0.5 rounding error"
    assert math.isnan(round_half_away(math.nan))
    assert [round(0.5), round(2.5)] == [0, 2], "Python's own rounds half to even"


def test_as_u64_saturates():
    assert (as_u64(math.nan), as_u64(-3.0), as_u64(2.9), as_u64(1e30)) == (0, 0, 2, 2**64 - 1)


def test_rust_min_max_take_the_other_operand_over_nan():
    assert (fmin(math.nan, 1.0), fmin(1.0, math.nan), fmax(math.nan, 2.0), fmax(2.0, 3.0)) == (1.0, 1.0, 2.0, 3.0)


def test_sum_left_adds_in_order_like_rusts_sum():
    xs = [1e16, 1.0, -1e16]
    assert sum_left(xs) == (1e16 + 1.0) - 1e16 == 0.0
    assert math.copysign(1.0, sum_left([])) == -1.0, "Rust's f64 sum starts from -0.0"


def test_fixed_formatting_matches_rusts():
    assert fmt_fixed(0.88314, 4) == "0.8831"
    assert fmt_fixed(0.125, 2) == "0.12", "ties to even on the exact value"
    assert fmt_fixed(50.5, 0) == "50" and fmt_fixed(51.5, 0) == "52"
    assert (fmt_fixed(math.nan, 4), fmt_fixed(-math.inf, 0)) == ("NaN", "-inf")
