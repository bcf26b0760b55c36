"""A `why` result in the history (kind "why"): its findings and verdicts kept, `history`'s line naming them, and two
such records compared saying which findings appeared or went away; read back from the file as every record is."""

from __future__ import annotations

from torchperf_tui.core.stats import compute_stats
from torchperf_tui.engine.analysis.advice_result import CONFIRMED, Advice, Finding
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_compare import compare_records
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.engine.records.result_records import records_of
from torchperf_tui.wording.history import history_line


def advice(*findings: Finding, p50: float = 10.0) -> Advice:
    samples = [p50 * (1 + i / 100) for i in range(20)]
    return Advice(model="resnet18", device="cpu", input_shape=(1, 3, 224, 224), dtype="float32", step="infer",
                  flags_text="threads=1", pass_ms=compute_stats(samples).p50_ms, samples_ms=samples,
                  threshold_pct=5.0, findings=list(findings), flags=Flags(num_threads=1), threads_used=1)


def test_two_why_records_say_which_findings_appeared_and_went_away(tmp_path):
    threads = Finding("threads", "the pass runs on 1 CPU thread of 2 physical cores", ["e"], at_stake_ms=4.0,
                      pass_ms=10.0, fix="threads=2", options="--threads 2", verdict=CONFIRMED, ratio=0.6,
                      ci_low=0.55, ci_high=0.65, p_value=0.002, a_median_ms=10.0)
    slow = Finding("slow_layer", "layer scale takes 40 % of the pass", ["e"], at_stake_ms=3.5, pass_ms=10.0,
                   layer="scale", why_not_run="no option fixes it: the layer's own code")
    history = HistoryFile(tmp_path / "h.jsonl")
    history.extend([*records_of(advice(threads, slow), {}), *records_of(advice(slow, p50=6.0), {})])
    before, after = history.load().records  # read back, every field checked
    assert before.kind == after.kind == "why"
    assert [f["key"] for f in before.details["findings"]] == ["threads", "slow_layer"]
    assert before.details["findings"][0]["verdict"] == "confirmed" and before.details["findings"][0]["measured_ms"] == 4.0
    assert "· findings: threads (confirmed), slow_layer:scale (not run)" in history_line(before)
    comparison = compare_records(before, after)
    assert comparison.findings_note == "went away: threads"
    assert comparison.summary().endswith("; went away: threads")
    assert compare_records(after, before).findings_note == "findings appeared: threads"
    assert compare_records(after, after).findings_note == "the same findings"


def test_a_why_record_keeps_the_step_and_model_options_it_ran_under(tmp_path):
    """A `why` of a training step, quantized, is not like for like with one of a pass: its record says what its
    iterations did as a timing run's does (it said 'infer' whatever ran)."""
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    trained = advice()
    trained.config = BenchConfig(model="resnet18", step="train", optimizer="adamw", quant="int8wo")
    plain = advice()
    plain.config = BenchConfig(model="resnet18")
    history = HistoryFile(tmp_path / "h.jsonl")
    history.extend([*records_of(trained, {}), *records_of(plain, {})])
    a, b = history.load().records
    assert (a.details["step"], a.details["optimizer"], a.details["quant"]) == ("train", "adamw", "int8wo")
    assert (b.details["step"], b.details["optimizer"]) == ("infer", None) and "quant" not in b.details
    assert {"step", "optimizer", "quant"} <= set(compare_records(a, b).setup_diff)


def test_a_why_record_without_findings_says_so_and_other_pairs_have_no_findings_note(tmp_path):
    history = HistoryFile(tmp_path / "h.jsonl")
    history.extend(records_of(advice(), {}))
    record = history.load().records[0]
    assert "· no finding above 5 % of the pass" in history_line(record)
    from tests.records import make_record

    assert compare_records(make_record(p50=10.0), make_record(p50=9.0)).findings_note is None
