"""--quant on the command line: refused in one line where the box cannot run it, a run's quantization and drift in
its output, its JSON and its history record, B's drift beside an A/B's verdict, and the gate measuring it again."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run
from torchperf_tui.engine.records.history_file import HistoryFile

MLP = ["tests.tinymodels:quant_mlp", "--input", "8x32", "--device", "cpu"]


@pytest.mark.parametrize("scheme, why", [("fp8", "compute capability 8.9"), ("int4wo", "a CUDA GPU")])
def test_a_scheme_the_cpu_cannot_run_is_one_line_and_exit_2(capsys, scheme, why):
    code, out, err = run(capsys, "bench", *MLP, "--quant", scheme, "--no-history")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert why in err and "the CPU runs int8wo, int8dq or fp8wo" in err


def test_every_command_that_takes_flags_takes_quant(capsys):
    for command in ("bench", "compare", "throughput", "profile", "roofline", "determinism", "memsnap", "sweep"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and "--quant" in out, command
    code, out, _ = run(capsys, "flops", "--help")  # counted on the meta device: a scheme changes no count
    assert "--quant" not in out


def test_a_quantized_runs_output_json_and_record_say_what_it_converted_and_its_drift(capsys, tmp_path):
    history = tmp_path / "h.jsonl"
    code, out, err = run(capsys, "--history", str(history), "bench", *MLP, "--quant", "int8wo", "--iters", "5",
                         "--warmup", "1")
    assert code == 0, err
    assert ("quantization       int8wo: 2 Linear converted (body.0, body.2); 1 layer left as it was: 1 too small"
            in out)
    assert "drift              SQNR " in out and "arg-max changed at" in out and "of 8 positions" in out
    record = HistoryFile(history).load().records[0]
    assert record.config["quant"] == "int8wo" and record.details["quant"] == "int8wo"
    assert record.details["drift"]["finite"] and record.details["quantized"]["left"] == [["head", "too small: 32 in, "
                                                                                                  "4 out"]]
    code, out, _ = run(capsys, "--history", str(history), "history")
    assert code == 0 and "8x32 float32 quant int8wo" in out
    # the gate measures the record's configuration again: quantized, as it was
    code, out, err = run(capsys, "--history", str(history), "compare", "--baseline", record.id, "--no-history")
    assert code in (0, 1) and "differences: none" in out, err
    code, out, _ = run(capsys, "bench", *MLP, "--quant", "int8wo", "--iters", "3", "--warmup", "0", "--json",
                       "--no-history")
    data = json.loads(out)
    assert data["quant"] == "int8wo" and data["quantized"]["converted"] == ["body.0", "body.2"]
    assert data["drift"]["against"] == "the float32 model at full precision" and data["drift"]["sqnr_db"] > 20


def test_an_ab_says_bs_drift_against_a_beside_its_verdict(capsys):
    code, out, err = run(capsys, "compare", *MLP, "--a", "", "--b", "quant=int8wo", "--blocks", "6", "--per-block",
                         "2", "--no-history")
    assert code == 0, err
    lines = out.splitlines()
    verdict = next(i for i, line in enumerate(lines) if "significant" in line or line.startswith("B is"))
    assert lines[verdict + 1].startswith("arm B quantization: int8wo: 2 Linear converted")
    assert lines[verdict + 2].startswith("B against A: SQNR ") and "A is the float32 model at full precision" in out


def test_a_bad_scheme_in_a_spec_is_one_line(capsys):
    code, out, err = run(capsys, "compare", *MLP, "--a", "", "--b", "quant=int3", "--no-history")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "unknown quantization scheme 'int3': choose int8wo, int8dq, int4wo, fp8 or fp8wo" in err
