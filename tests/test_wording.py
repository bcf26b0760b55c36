"""The wording package: one wording per result for the CLI and the app, importing neither torch nor Textual."""

import subprocess
import sys
from types import SimpleNamespace

from torchperf_tui.wording import NORMAL, WARNING
from torchperf_tui.wording.conditions import conditions_line_rows, conditions_rows
from torchperf_tui.wording.timing import noise_rows, peak_value, state_rows


def test_wording_imports_neither_torch_nor_textual():
    code = ("import sys\nimport torchperf_tui.wording.timing, torchperf_tui.wording.conditions, "
            "torchperf_tui.wording.modes, torchperf_tui.wording.roofline\n"
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


class Conditions:
    throttled = throttled_share = 0.25
    gpu_index = 0

    def summary(self):
        return "SM 1410 MHz"

    def short(self, step, brief=False):
        return f"short {step} {brief}"

    def throttle_text(self):
        return "throttled 25 % of the time"

    def energy_text(self, step):
        return f"energy per item ({step})"


def test_conditions_say_throttling_as_a_warning_in_both_places():
    rows = conditions_rows(Conditions(), "train", during="the run")
    assert rows == [("GPU during the run", "SM 1410 MHz", NORMAL), ("throttling", "throttled 25 % of the time", WARNING),
                    ("energy", "energy per item (train)", NORMAL)]
    result = SimpleNamespace(conditions=Conditions(), step="infer")
    assert conditions_line_rows(result, "#3", compact=True) == [("GPU over run #3", "short infer True", WARNING)]
    assert conditions_line_rows(result, "#3")[1] == ("", "throttled 25 % of the time", WARNING)
    assert conditions_rows(None) == [] and conditions_line_rows(SimpleNamespace(), "#3") == []


def test_timing_facts_are_rows_with_levels():
    result = SimpleNamespace(step_peak_bytes=3 * 1024**3, forward_peak_bytes=1024**3, state_notes=["tf32 changed"],
                             host_noise=SimpleNamespace(summary=lambda: "load 0.1"),
                             disturbance_marks=lambda: ["noisy host: load 3"])
    assert peak_value(result) == "training step 3.0 GiB · forward pass alone 1.0 GiB"
    assert peak_value(SimpleNamespace()) is None
    assert state_rows(result) == [("torch state", "tf32 changed", WARNING)]
    assert noise_rows(result) == [("host", "load 0.1", NORMAL), ("warning", "noisy host: load 3", WARNING)]
