"""`--mlflow URI`: bench, compare, throughput and sweep each log one MLflow run to a real sqlite store in tmp_path,
read back here with MlflowClient (parameters, metrics, tags, samples.json); a URI that cannot be used (a closed port,
a bad scheme, MLflow not installed) is one line and exit 2 before anything is measured. The jobs run in this process
(tests/measure/in_process.py), as test_cli.py's do."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_run import run

pytest.importorskip("mlflow", reason="the mlflow extra (pip install -e '.[test]' installs it)")

TINY = ["tests.tinymodels:tiny_cnn", "--input", "1,3,16,16", "--device", "cpu"]
LLAMA = ["hf:llama", "--model-args", "num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
         "num_key_value_heads=4,vocab_size=256,max_position_embeddings=64", "--device", "cpu"]


@pytest.fixture(autouse=True)
def _jobs_in_this_process(monkeypatch):
    from tests.measure.in_process import InProcessMeasurement

    monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", InProcessMeasurement)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def _runs(uri: str):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("torchperf-tui")
    return client, client.search_runs([experiment.experiment_id])


def _samples(client, run) -> dict:
    return json.loads(Path(client.download_artifacts(run.info.run_id, "samples.json")).read_text())


def test_bench_logs_a_run_with_its_setup_statistics_environment_and_samples(capsys, store, tmp_path):
    code, out, err = run(capsys, "bench", *TINY, "--iters", "5", "--warmup", "1", "--threads", "1",
                         "--mlflow", store, "--json")
    assert code == 0, err
    assert "logged to MLflow: run" in err and json.loads(out)["model"] == "tests.tinymodels:tiny_cnn"
    client, runs = _runs(store)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    data = runs[0].data
    assert data.params["model"] == "tests.tinymodels:tiny_cnn" and data.params["input_shape"] == "1x3x16x16"
    assert data.params["dtype"] == "float32" and data.params["device"] == "cpu" and data.params["step"] == "infer"
    assert data.params["flag.num_threads"] == "1" and data.params["flags"] == "threads=1"
    for name in ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "std_ms", "samples_per_s"):
        assert data.metrics[name] >= 0, name
    assert data.metrics["n"] == 5
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert data.tags["torchperf.record_id"] == history[-1]["id"]  # the run and its history line, found from each other
    assert data.tags["torchperf.kind"] == "timing" and data.tags["env.hostname"] == socket.gethostname()
    for key in ("env.torch", "env.cuda_runtime", "env.driver", "env.device_name"):
        assert data.tags[key], key
    samples = _samples(client, runs[0])
    assert len(samples["samples_ms"]) == 5 and samples["samples_ms"] == history[-1]["samples_ms"]
    assert data.metrics["p50_ms"] == pytest.approx(sorted(samples["samples_ms"])[2], abs=1e-4)  # kept to 0.1 µs


def test_compare_logs_one_run_with_both_arms_and_the_verdict(capsys, store):
    code, out, err = run(capsys, "compare", *TINY, "--a", "threads=1", "--b", "threads=2", "--blocks", "6",
                         "--per-block", "2", "--mlflow", store, "--json")
    assert code == 0, err
    verdict = json.loads(out)["verdict"]
    client, runs = _runs(store)
    assert len(runs) == 1
    data = runs[0].data
    assert data.params["a.spec"] == "threads=1" and data.params["b.spec"] == "threads=2"
    assert data.params["a.flag.num_threads"] == "1" and data.params["b.flag.num_threads"] == "2"
    for key in ("ratio", "ci_low", "ci_high", "p_value"):
        assert data.metrics[key] == pytest.approx(verdict[key]), key
    assert data.metrics["significant"] == float(verdict["significant"]) and data.metrics["pairs"] == 6
    assert data.metrics["a.n"] == 12 and data.metrics["b.p50_ms"] > 0
    assert data.tags["torchperf.verdict"].startswith(("B is", "no significant difference"))
    assert data.tags["torchperf.record_id.a"] != data.tags["torchperf.record_id.b"]
    samples = _samples(client, runs[0])
    assert len(samples["a"]["samples_ms"]) == 12 and samples["verdict"]["ratio"] == pytest.approx(verdict["ratio"])


def test_throughput_logs_the_best_batch_and_each_try_as_a_step(capsys, store):
    code, out, err = run(capsys, "throughput", *TINY, "--max-batch", "4", "--mlflow", store, "--json")
    assert code == 0, err
    result = json.loads(out)
    client, runs = _runs(store)
    data = runs[0].data
    assert data.metrics["best_batch"] == result["best_batch"]
    assert data.metrics["samples_per_s"] == pytest.approx(result["samples_per_s"])
    assert data.params["input_shape"] == "3x16x16" and data.params["max_batch_bound"] == "4"
    steps = {m.step for m in client.get_metric_history(runs[0].info.run_id, "try.samples_per_s")}
    assert steps == {p["batch"] for p in result["points"]}
    assert data.tags["torchperf.kind"] == "throughput" and data.tags["env.torch"]
    assert _samples(client, runs[0])["tries"]


def test_sweep_logs_one_step_per_length(capsys, store):
    code, out, err = run(capsys, "sweep", *LLAMA, "--seq-lens", "16-32", "--iters", "2", "--warmup", "0",
                         "--mlflow", store, "--json")
    assert code == 0, err
    client, runs = _runs(store)
    data = runs[0].data
    assert data.params["model"] == "hf:llama" and "num_hidden_layers=2" in data.params["model_args"]
    assert data.params["seq_lens"] == "16-32" and data.tags["torchperf.kind"] == "sweep"
    history = client.get_metric_history(runs[0].info.run_id, "p50_ms")
    assert sorted(m.step for m in history) == [16, 32] and all(m.value > 0 for m in history)
    assert [p["length"] for p in _samples(client, runs[0])["result"]["points"]] == [16, 32]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_is_one_line_exit_2_quickly_and_nothing_is_measured(capsys, tmp_path):
    start = time.monotonic()
    code, out, err = run(capsys, "bench", *TINY, "--iters", "2", "--mlflow", f"http://127.0.0.1:{_closed_port()}")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "cannot be used: nothing answers there (connection refused)" in err
    assert time.monotonic() - start < 20
    assert not (tmp_path / "history.jsonl").exists()  # refused before the measurement


@pytest.mark.parametrize("uri, words", [
    ("ftp://host/x", "scheme 'ftp'; give a local store (sqlite:///path/mlflow.db) or a tracking server"),
    ("mlflow.db", "no scheme; give a local store"),
    ("sqlite:////no/such/folder/m.db", "no folder /no/such/folder for its database"),
])
def test_a_bad_uri_is_one_line_exit_2(capsys, uri, words):
    for command in (["bench", *TINY], ["throughput", *TINY], ["sweep", *LLAMA],
                    ["compare", *TINY, "--a", "threads=1", "--b", "threads=2"]):
        code, out, err = run(capsys, *command, "--mlflow", uri)
        assert code == 2 and err.count("\n") == 1 and words in err, (command, err)


def test_what_mlflow_cannot_log_is_refused_before_it_runs(capsys, store):
    code, _, err = run(capsys, "bench", *TINY, "--modes", "sync,pipelined", "--mlflow", store)
    assert code == 2 and "--modes gives several timings side by side" in err
    code, _, err = run(capsys, "compare", *TINY, "--a", "threads=1", "--b", "threads=2", "--kernels",
                       "--mlflow", store)
    assert code == 2 and "--kernels lists kernels" in err


def test_mlflow_not_installed_gives_its_install_line(capsys, monkeypatch, store):
    import builtins

    real_import = builtins.__import__

    def no_mlflow(name, *args, **kwargs):
        if name == "mlflow" or name.startswith("mlflow."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mlflow)
    code, out, err = run(capsys, "bench", *TINY, "--mlflow", store)
    assert code == 2 and err.count("\n") == 1
    assert "--mlflow needs MLflow, which is not installed" in err and "pip install 'torchperf-tui[mlflow]'" in err


def test_mlflow_and_the_store_import_no_torch():
    """The logging runs in the CLI's and the app's process, which never import torch."""
    code = ("import sys, tempfile, os\n"
            "from torchperf_tui.engine.records.mlflow_store import MlflowSink\n"
            "sink = MlflowSink.open('sqlite:///' + os.path.join(tempfile.mkdtemp(), 'm.db'))\n"
            "import mlflow.entities\n"
            "print(sorted(m for m in ('torch', 'transformers', 'timm') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_test_extra_installs_the_mlflow_extra():
    """So the tests above run wherever `sh scripts/install.sh --test` installed the project (CI), not skip."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert "torchperf-tui[mlflow]" in extras["test"]
    assert {r.split(">")[0].split("<")[0] for r in extras["mlflow"]} == {"mlflow-skinny", "sqlalchemy", "alembic"}


def test_a_baseline_gate_logs_the_run_now_with_its_verdict(capsys, store, tmp_path):
    history = str(tmp_path / "history.jsonl")
    code, out, err = run(capsys, "--history", history, "bench", *TINY, "--iters", "8", "--warmup", "1", "--json")
    assert code == 0, err
    base = tmp_path / "base.json"
    base.write_text(out)
    code, out, err = run(capsys, "--history", history, "compare", "--baseline", str(base), "--mlflow", store)
    assert code in (0, 1), err  # an A/A gate: a loaded box can make the run now slower past the 10 %
    client, runs = _runs(store)
    assert len(runs) == 1  # the verdict's run (a failing first run is measured again, and only the second logged)
    data = runs[0].data
    assert data.tags["torchperf.baseline_id"] == json.loads(base.read_text())["record"]["id"]
    assert data.tags["torchperf.gate"].split()[0] in ("faster", "slower", "same")
    assert data.metrics["gate.exit_code"] == code and ("(fails)" in data.tags["torchperf.gate"]) == (code == 1)
    assert data.metrics["gate.ci_low"] <= data.metrics["gate.ratio"] <= data.metrics["gate.ci_high"]
    assert data.metrics["n"] == 8 and data.params["model"] == "tests.tinymodels:tiny_cnn"
