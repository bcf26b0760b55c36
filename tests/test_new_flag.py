"""A new flag is one entry in the flag table (core/flag_table.py), end to end.

The test copies the package, adds one entry to the copy's FLAG_ENTRIES (a bool flag on a real torch setting, cuBLAS's
reduced-precision reductions in fp16 matmuls) and nothing else, and runs tests/new_flag_script.py against the copy
in a process of its own: the flag must be in `--help` and compare's SPEC keys, set by its option, a SPEC (and its
alias) and the baseline's overrides, applied and read back by the guard (which also catches a model's code flipping
it), said where it does nothing (a run's flags, an A/B's arm), carried by a run's history record into MLflow, the
CSV export and the fleet's set-up name, read back from that record as a baseline, named by the gate's differences
as the command line names it, and a switch in the sidebar that flips. A consumer that keeps its own list of flags
fails here."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tui" / "torchperf_tui"

# Its name (a record's key, MLflow's and the CSV's), its option, and its SPEC keys all differ, so that a consumer that
# names flags any other way than through the table (its own list, or the name where the option is meant) is caught.
ENTRY = '''
    FlagEntry("matmul_fp16_reduction", "fp16 reduction", bool, True, "cuda",
             "allow reduced-precision reductions in fp16 matmuls (cuBLAS)",
             option=FlagOption("--fp16-reduction", "cuBLAS may reduce in fp16 within fp16 matmuls (default on)",
                               SWITCH),
             keys=("fp16_reduction", "fp16_reduced"),
             torch_attr="backends.cuda.matmul.allow_fp16_reduced_precision_reduction"),'''

# A model whose forward turns the setting back on, under a run that asked for it off.
FLIPPING_MODEL = '''
import torch
from torch import nn


class Flipper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
        return self.fc(x)


def flips_fp16_reduction():
    return Flipper()
'''


def with_entry(source: str, entry: str) -> str:
    """`source` (core/flag_table.py) with `entry` added as the last element of FLAG_ENTRIES."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and "FLAG_ENTRIES" in ast.unparse(node).split("=")[0]:
            last = node.value.elts[-1]
            lines = source.splitlines(keepends=True)
            offset = sum(len(line.encode()) for line in lines[:last.end_lineno - 1]) + last.end_col_offset
            data = source.encode()
            end = data.index(b",", offset) + 1  # the comma after the last entry
            return (data[:end] + entry.encode() + data[end:]).decode()
    raise AssertionError("FLAG_ENTRIES not found in core/flag_table.py")


def test_a_flag_added_to_the_table_is_everywhere_a_flag_goes(tmp_path):
    copy = tmp_path / "src" / "torchperf_tui"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / "core" / "flag_table.py"
    table.write_text(with_entry(table.read_text(encoding="utf-8"), ENTRY), encoding="utf-8")
    (tmp_path / "flag_flipping_model.py").write_text(textwrap.dedent(FLIPPING_MODEL), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "tests.new_flag_script"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("FOUND "))
    found = json.loads(line.removeprefix("FOUND "))
    assert Path(found["package"]).is_relative_to(copy)  # the copy ran, not the package beside the tests

    # --help: its option, and its SPEC key among compare's, after the table's others and before the run's settings
    assert "--fp16-reduction, --no-fp16-reduction" in found["bench_help"]
    assert "cuBLAS may reduce in fp16 within fp16 matmuls (default on)" in " ".join(found["bench_help"].split())
    assert "matmul_precision, fp16_reduction, dtype," in " ".join(found["compare_help"].split())
    assert "fp16_reduced" in found["spec_keys_said"] and "fp16_reduction" in found["spec_keys_said"]
    # set by its option, a SPEC (either key, not both), and the baseline's overrides (named as the gate names it)
    assert found["cli_default"] is True and found["cli_off"] is False
    assert found["spec_off"] == [False, False]
    assert found["spec_twice"] == "fp16_reduced set by both fp16_reduction and fp16_reduced in " \
                                  "'fp16_reduction=on,fp16_reduced=off': give each setting once per arm"
    assert found["spec_bad_value"] == "fp16_reduction='maybe': expected on/off, true/false or 1/0"
    assert found["baseline_override"] == [False, ["fp16_reduction"]]
    # the guard applies it, reads it back, puts it back, and says where it does nothing (an A/B's arm too)
    assert found["applied"] == [False, False] and found["restored"] is True
    assert found["inert_on_cpu"] == ["fp16 reduction has no effect here: a CUDA setting: no effect on the CPU"]
    assert found["inert_arm"] == ["arm B: fp16 reduction has no effect here: a CUDA setting: no effect on the CPU"]
    assert found["described"] == ["defaults", "fp16 reduction=off"]
    # a run under it: the model's forward that turned it back on is caught and said
    assert any("fp16 reduction to on (asked: off)" in note for note in found["state_notes"]), found["state_notes"]
    # the record carries it (its flags, and their text), and so do MLflow's params, the CSV export and the fleet's
    # set-up name; a baseline read back from that record runs under it
    assert found["record_flags"] is False
    assert found["mlflow_param"] == "False"
    assert "flag.matmul_fp16_reduction" in found["csv_header"].split(",")
    assert "fp16 reduction=off" in found["fleet_setup"]
    assert found["baseline_flags"] is False
    # the gate's differences name it as the command line does
    assert ["fp16_reduction", True, False] in found["gate_differences"]
    assert any("fp16_reduction on -> off (from the command line)" in line for line in found["gate_lines"])
    # the sidebar: a switch with its help, applicable on the (fake) GPU, that flips
    assert found["switch"] == [True, False, "allow reduced-precision reductions in fp16 matmuls (cuBLAS)"]
    assert found["sidebar_text"] == "fp16 reduction"
    assert found["flipped"] is False


def test_an_entry_that_misses_what_a_consumer_needs_is_refused_at_import(tmp_path):
    """A text flag without its choices (the sidebar's select) and an option typed alone for a flag that is on by
    default: the table names both when it is imported, before any front end builds on it."""
    copy = tmp_path / "src" / "torchperf_tui"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / "core" / "flag_table.py"
    table.write_text(with_entry(table.read_text(encoding="utf-8"), BAD_ENTRIES), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    proc = subprocess.run([sys.executable, "-c", "import torchperf_tui.core.flag_table"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "conv_algo: a text flag needs its choices (the sidebar's select)" in proc.stderr
    assert "fused: --fused typed alone turns it on, so it is off by default" in proc.stderr


BAD_ENTRIES = '''
    FlagEntry("conv_algo", "conv algo", str, "auto", "cuda", "the convolution algorithm", parse=str.lower,
             keys=("conv_algo",), torch_attr="backends.cudnn.conv_algo"),
    FlagEntry("fused", "fused", bool, True, "any", "fused kernels", option=FlagOption("--fused", "fused", ON),
             torch_attr="backends.fused"),'''
