"""`throughput --slo`: the largest batch whose latency at the user's quantile stays within the budget
(engine/measurements/slo_search.py), over a fake runner whose passes take a known time per batch: the batch grows
while it meets the budget, bisects between the last that met and the first that missed, never chooses a batch whose
passes cannot support the quantile, and says goodput and every point tried."""

from __future__ import annotations

import itertools

import pytest

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.options import OptionError
from torchperf_tui.core.slo import parse_slo
from torchperf_tui.core.stats import samples_needed
from torchperf_tui.engine.measurements.batch_search import MemoryCapExceeded
from torchperf_tui.engine.measurements.slo_search import MEETS, MISSES, NO_FIT, UNKNOWN, search_slo


class FakeBatches:
    """A pass at batch b takes `base + per_item * b` ms, every `slow_every`th pass `slow_factor` times that; batches
    above `fits_up_to` do not fit. `clock` advances by the passes' time."""

    def __init__(self, base=2.0, per_item=1.0, slow_every=0, slow_factor=1.0, fits_up_to=10**6, stop_after=None):
        self.base, self.per_item, self.slow_every, self.slow_factor = base, per_item, slow_every, slow_factor
        self.fits_up_to, self.stop_after = fits_up_to, stop_after
        self.now = 0.0
        self.asked: list[tuple[int, int]] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, batch, warmup, iters):
        self.asked.append((batch, iters))
        if batch > self.fits_up_to:
            raise MemoryCapExceeded(f"batch {batch} over the cap")
        samples = []
        for i in itertools.islice(itertools.count(), warmup + iters):
            ms = self.base + self.per_item * batch
            if self.slow_every and i % self.slow_every == 0:
                ms *= self.slow_factor
            self.now += ms / 1000.0
            if i >= warmup:
                samples.append(ms)
            if self.stop_after is not None and len(samples) >= self.stop_after:
                break
        return samples


def test_the_batch_grows_while_it_meets_then_bisects_to_the_largest_within_the_budget():
    fake = FakeBatches(base=2.0, per_item=1.0)  # batch b: 2 + b ms, every pass alike
    slo = parse_slo("p99=20ms")
    out = search_slo(fake, slo, time_budget_s=None, clock=fake.clock)
    # 1, 2, 4, 8, 16 meet (18 ms), 32 misses (34 ms); bisected: 24 misses, 20 misses, 18 meets (20 ms), 19 misses
    assert [(p.batch, p.phase, p.verdict) for p in out.points] == [
        (1, "grow", MEETS), (2, "grow", MEETS), (4, "grow", MEETS), (8, "grow", MEETS), (16, "grow", MEETS),
        (32, "grow", MISSES), (24, "bisect", MISSES), (20, "bisect", MISSES), (18, "bisect", MEETS),
        (19, "bisect", MISSES)]
    assert out.chosen.batch == 18 and out.chosen.quantile.value_ms == pytest.approx(20.0)
    assert all(iters == samples_needed(0.99) for _, iters in fake.asked)  # 555 passes: p99 supported at each
    assert out.stop_reason == "batch 19 misses it: p99 21.00 ms; batch 18 is the largest that meets it"
    assert out.chosen.items_per_s == pytest.approx(18 * 1000 / 20.0)
    assert out.chosen.goodput_per_s == out.chosen.items_per_s  # every pass within the budget


def test_goodput_counts_only_the_passes_within_the_budget_and_a_slow_tail_misses_the_quantile():
    # every 50th pass of 4x: p99 is 4x the median; p50 alone would meet
    fake = FakeBatches(base=4.0, per_item=1.0, slow_every=50, slow_factor=4.0)
    out = search_slo(fake, parse_slo("p99=10ms"), clock=fake.clock, time_budget_s=None)
    first = out.points[0]
    assert first.batch == 1 and first.verdict == MISSES and out.chosen is None
    assert first.p50_ms == pytest.approx(5.0) and first.quantile.value_ms == pytest.approx(20.0)
    slow = sum(1 for i in range(3, 3 + 555) if i % 50 == 0)
    total_s = ((555 - slow) * 5.0 + slow * 20.0) / 1000.0
    assert first.goodput_per_s == pytest.approx((555 - slow) / total_s)
    assert out.stop_reason == "batch 1 misses it: p99 20.00 ms"
    median = search_slo(FakeBatches(base=4.0, per_item=1.0, slow_every=50, slow_factor=4.0), parse_slo("p50=10ms"),
                        max_batch=4, time_budget_s=None)
    assert median.chosen.batch == 4 and median.stop_reason.startswith("max-batch: batch 4 met the budget")


def test_a_batch_that_does_not_fit_ends_the_growth_like_a_miss():
    fake = FakeBatches(base=1.0, per_item=0.1, fits_up_to=5)
    out = search_slo(fake, parse_slo("p90=100ms"), clock=fake.clock, time_budget_s=None)
    assert [(p.batch, p.verdict) for p in out.points] == [(1, MEETS), (2, MEETS), (4, MEETS), (8, NO_FIT),
                                                          (6, NO_FIT), (5, MEETS)]
    assert out.chosen.batch == 5 and out.stop_reason.startswith("batch 6 does not fit: batch 6 over the cap")


def test_the_time_budget_stops_before_a_batch_it_cannot_afford_and_a_short_batch_is_unknown_never_chosen():
    fake = FakeBatches(base=2.0, per_item=1.0)
    out = search_slo(fake, parse_slo("p99=1s"), clock=fake.clock, time_budget_s=10.0)
    # batch 1: 558 passes of 3 ms (1.7 s); 2: 2.2 s; 4: 3.3 s; 8 would take 5.6 s with 2.8 s left
    assert [p.batch for p in out.points] == [1, 2, 4] and out.chosen.batch == 4
    assert out.stop_reason.startswith("time budget: batch 8 would not end within the 10 s budget")
    fake = FakeBatches(base=2.0, per_item=1.0)  # 8 meets 10 ms, 16 misses it; 12 would not end in what is left
    out = search_slo(fake, parse_slo("p99=10ms"), clock=fake.clock, time_budget_s=30.0)
    assert [p.batch for p in out.points] == [1, 2, 4, 8, 16] and out.chosen.batch == 8
    assert out.stop_reason == "time budget: bisecting between 8 and 16, batch 12 would not end within the 30 s budget"
    cut = FakeBatches(base=2.0, per_item=1.0, stop_after=100)  # the runner ends the passes early (the budget)
    out = search_slo(cut, parse_slo("p99=1s"), clock=cut.clock, time_budget_s=None)
    assert [(p.batch, p.verdict, p.n) for p in out.points] == [(1, UNKNOWN, 100)] and out.chosen is None
    assert out.stop_reason == "time budget: batch 1 ran 100 of the 555 passes its p99 needs to be supported"


def test_a_cancel_ends_the_search_and_what_ran_stays():
    fake = FakeBatches()
    calls = itertools.count()
    # the search asks before each batch and after it: the fifth question is the one after batch 4 ran
    out = search_slo(fake, parse_slo("p50=1s"), clock=fake.clock, should_cancel=lambda: next(calls) >= 5)
    assert out.cancelled and [p.batch for p in out.points] == [1, 2]
    assert out.stop_reason == "cancelled while growing, during batch 4"  # where the cancel found the search
    calls = itertools.count()
    out = search_slo(fake, parse_slo("p50=1s"), clock=fake.clock, should_cancel=lambda: next(calls) >= 4)
    assert out.cancelled and [p.batch for p in out.points] == [1, 2]
    assert out.stop_reason == "cancelled while growing, before batch 4"  # between batches: nothing of 4 ran
    fake = FakeBatches(base=2.0, per_item=1.0)  # 8 meets 10 ms, 16 misses it: the cancel comes as 12 runs
    calls = itertools.count()
    out = search_slo(fake, parse_slo("p99=10ms"), clock=fake.clock, should_cancel=lambda: next(calls) >= 11)
    assert out.cancelled and [p.batch for p in out.points] == [1, 2, 4, 8, 16] and out.chosen.batch == 8
    assert out.stop_reason == "cancelled while bisecting between 8 and 16, during batch 12"
    with pytest.raises(TorchperfError, match="the max batch must be at least 1"):
        search_slo(fake, parse_slo("p50=1s"), max_batch=0)


@pytest.mark.parametrize("text, words", [
    ("p99", "write pQ=BUDGET with a unit"), ("p99=20", "write pQ=BUDGET with a unit"), ("99=20ms", "write pQ"),
    ("p100=5ms", "write pQ"), ("p0.5=5ms", "the quantile runs from p1"), ("p99=0ms", "above 0 and at most an hour"),
    ("p99=2h", "write pQ"), ("p99=3601s", "at most an hour"), ("p99=nanms", "write pQ"), ("", "write pQ")])
def test_a_budget_typed_wrong_is_one_line_naming_what_to_write(text, words):
    with pytest.raises(OptionError, match=words):
        parse_slo(text)


def test_a_budget_is_read_in_its_unit():
    assert [(s.q, s.budget_ms, s.name) for s in map(parse_slo, ("p99=20ms", "P90=0.5s", "p50=800us", "p99.9=5ms"))] \
        == [(0.99, 20.0, "p99"), (0.9, 500.0, "p90"), (0.5, 0.8, "p50"), (0.999, 5.0, "p99.9")]
    assert parse_slo("p99=20ms").text() == "p99 within 20.00 ms"


def test_a_budget_that_ends_before_a_batch_s_first_pass_is_the_time_budget_not_a_cancel():
    # the runner's passes stopped before the first timed one: no sample
    out = search_slo(lambda batch, warmup, iters: [], parse_slo("p50=1s"), time_budget_s=1.0)
    assert not out.cancelled and out.points == [] and out.chosen is None
    assert out.stop_reason == "time budget: it ended before batch 1's first timed pass"


def test_a_batch_cut_to_a_cold_pass_is_among_the_points_tried_not_on_the_frontier(monkeypatch):
    from torchperf_tui.engine.measurements.throughput import SloResult

    cut = FakeBatches(stop_after=1)
    out = search_slo(cut, parse_slo("p99=1s"), clock=cut.clock, time_budget_s=None)
    assert [(p.batch, p.verdict, p.n) for p in out.points] == [(1, UNKNOWN, 1)]
    result = SloResult(model="m", device="cpu", sample_shape=(3,), dtype="float32", channels_last=False,
                       slo=parse_slo("p99=1s"), points=out.points, chosen=out.chosen, stop_reason=out.stop_reason,
                       cancelled=False, duration_s=1.0, time_budget_s=None, max_batch_bound=4, memory_cap_bytes=0)
    assert result.frontier == [] and result.to_dict()["points"][0]["n"] == 1
