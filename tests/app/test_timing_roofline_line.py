"""The Timing pane's roofline line words the share of the measured ceiling as the engine does
(engine/analysis/roofline.py's utilisation_text, which the CLI uses too): the figure, or above 100 % the sentence that says
the ceiling is too low, never a utilisation above 100 % as a fact."""

from __future__ import annotations

from torchperf_tui.wording.roofline import roofline_text
from torchperf_tui.engine.analysis.roofline import RooflineResult, above_ceiling_text, utilisation_text


def result_with(measured_mfu_pct: float) -> RooflineResult:
    """A run beside a datasheet peak of 100 TFLOP/s and a measured ceiling of 50."""
    above = ({"measured_mfu_pct": above_ceiling_text(measured_mfu_pct, "measured")} if measured_mfu_pct > 100
             else {})
    return RooflineResult(model="m", device="cuda:0", dtype="float32", input_shape=(1, 3, 8, 8), flops=10**9,
                          bytes_moved=10**6, bytes_method="unfused estimate", latency_ms=1.0, latency_source="median",
                          achieved_tflops=measured_mfu_pct / 2, achieved_bandwidth_gbs=1.0,
                          arithmetic_intensity=1000.0, peak_tflops=100.0, peak_bandwidth_gbs=1000.0,
                          mfu_pct=measured_mfu_pct / 2, bandwidth_pct=0.1, ridge_flops_per_byte=100.0,
                          side="compute", attainable_tflops=100.0, roofline_pct=measured_mfu_pct / 2,
                          peaks_source="datasheet", measured_tflops=50.0, measured_mfu_pct=measured_mfu_pct,
                          peak_from="datasheet", above_ceiling=above, exceeds_ceiling=bool(above))


def test_the_share_of_the_measured_ceiling_is_the_engines_figure_beside_the_datasheet_mfu():
    result = result_with(42.04)
    assert f"({utilisation_text(result, 'measured_mfu_pct')} of the measured ceiling)" in roofline_text(result)
    assert "(42.0 % of the measured ceiling)" in roofline_text(result)


def test_a_share_above_the_measured_ceiling_is_the_engines_sentence_not_a_figure():
    result = result_with(121.0)
    line = roofline_text(result)
    sentence = utilisation_text(result, "measured_mfu_pct")
    assert sentence.startswith("above the measured ceiling (121 %): the ceiling is too low")
    assert f"({sentence})" in line and "121 % of the measured ceiling" not in line
