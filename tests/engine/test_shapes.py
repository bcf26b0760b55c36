"""Input-shape schedules: parsing, the shapes they produce, and the per-shape first-call report."""

from itertools import islice

import pytest

from torchperf_tui.core.errors import ShapeError
from torchperf_tui.engine.workloads.shapes import ShapeSchedule, parse_schedule, shape_report

BASE = (2, 3, 224, 224)


def first(schedule, base, n, sequence=False):
    """The first `n` shapes of `schedule`'s stream at `base`."""
    return list(islice(schedule.stream(base, sequence=sequence), n))


def test_fixed_is_the_default_and_repeats_the_configured_shape():
    schedule = parse_schedule(None)
    assert schedule == ShapeSchedule() and not schedule.varies and schedule.describe() == "fixed"
    assert first(schedule, BASE, 3) == [BASE] * 3


def test_cycle_spreads_k_sizes_around_the_configured_one_in_multiples_of_8_and_repeats_them():
    schedule = parse_schedule("cycle:4")
    sizes = schedule.sizes(BASE)
    assert sizes == [192, 224, 256, 288]
    shapes = first(schedule, BASE, 10)
    assert [s[-1] for s in shapes] == [192, 224, 256, 288, 192, 224, 256, 288, 192, 224]
    assert all(s[:2] == (2, 3) and s[-2] == s[-1] for s in shapes)
    assert parse_schedule("cycle:3:100-120").sizes(BASE) == [104, 112, 120]
    assert parse_schedule("cycle:3:100-102").sizes(BASE) == [100, 101, 102]  # too narrow for steps of 8


def test_random_is_seeded_within_its_range_and_can_vary_the_batch():
    schedule = parse_schedule("random:192-288:batch=1-8", seed=5)
    shapes = first(schedule, BASE, 200)
    assert shapes == first(parse_schedule("random:192-288:batch=1-8", seed=5), BASE, 200)
    assert shapes != first(parse_schedule("random:192-288:batch=1-8", seed=6), BASE, 200)
    assert {s[-1] for s in shapes} <= set(range(192, 289)) and len({s[-1] for s in shapes}) > 50
    assert {s[0] for s in shapes} == set(range(1, 9))
    assert schedule.extremes(BASE) == [(1, 3, 192, 192), (8, 3, 288, 288)]
    assert schedule.describe() == "random:192-288:batch=1-8"
    around = parse_schedule("random")  # no range: around the configured size, as cycle:K
    assert around.describe() == "random" and around.extremes(BASE) == [(2, 3, 192, 192), (2, 3, 288, 288)]


def test_spatial_dims_follow_the_input_rank():
    assert first(parse_schedule("cycle:2:32-40"), (1, 3, 8, 64, 64), 2) == [(1, 3, 8, 32, 32), (1, 3, 8, 40, 40)]
    assert first(parse_schedule("cycle:2:32-40"), (1, 80, 100), 1) == [(1, 80, 32)]
    with pytest.raises(ShapeError, match="has none"):
        first(parse_schedule("random:10-20"), (4, 512), 3)


@pytest.mark.parametrize("text, message", [
    ("cycle", "unknown shape schedule"), ("cycle:x", "whole number"), ("cycle:0", "between 1 and 64"),
    ("cycle:5:10-12", "do not fit"), ("random:300-200", "LO <= HI"), ("random:a-b", "LO-HI"),
    ("random:10-20:bs=1-2", "batch=B1-B2"), ("sometimes", "unknown shape schedule"),
])
def test_bad_schedules_are_one_line_shape_errors(text, message):
    with pytest.raises(ShapeError, match=message) as info:
        parse_schedule(text)
    assert "\n" not in str(info.value)


def test_report_costs_each_shape_its_first_iteration_minus_the_median_of_its_repeats():
    a, b, c = (1, 3, 8, 8), (1, 3, 16, 16), (1, 3, 24, 24)
    # first + warm-up at a, then timed: b (new), a, b, c (new, never again), b
    iterations = [(a, 50.0), (a, 10.0), (a, 12.0), (b, 40.0), (a, 11.0), (b, 20.0), (c, 99.0), (b, 22.0)]
    report = shape_report(parse_schedule("cycle:2"), iterations, [True, False, False, True, False])
    costs = {cost.shape: cost for cost in report.per_shape}
    assert costs[a].cost_ms == 50.0 - 11.0 and costs[a].repeats == 3
    assert not costs[a].first_timed  # the configured shape: its first iteration is the run's, reported apart
    assert costs[b].cost_ms == 40.0 - 21.0 and costs[b].first_timed
    assert costs[c].cost_ms is None and report.unrepeated == 1
    assert report.tuning_cost_ms == pytest.approx(19.0)
    assert (report.distinct, report.first_seen, report.repeats) == (3, 2, 3)
    assert report.first_seen_median_ms == pytest.approx((40.0 + 99.0) / 2)
    assert report.repeat_median_ms == 20.0
    assert "never repeated" in report.summary() and report.to_dict()["per_shape"][0]["shape"] == list(a)


def test_a_schedule_over_token_ids_varies_the_sequence_length():
    schedule = parse_schedule("cycle:3:64-256")
    shapes = first(schedule, (2, 128), 6, sequence=True)
    assert {s[0] for s in shapes} == {2} and sorted({s[1] for s in shapes}) == [64, 160, 256]
    assert schedule.extremes((2, 128), sequence=True) == [(2, 64), (2, 256)]
    with pytest.raises(ShapeError):
        first(schedule, (2, 128), 6)  # as an image-like shape it has no spatial size
