"""`torchperf-tui --mlflow URI`: a run finished in the app is logged to the store (a real sqlite one in tmp_path, read
back with MlflowClient), from a worker thread; a store that cannot be used is one error notification and the app
runs on."""

from __future__ import annotations

import pytest

from tests.app.helpers import TINY, choose_model, make_app, shown_notifications, wait_ready, wait_until

pytest.importorskip("mlflow", reason="the mlflow extra (pip install -e '.[test]' installs it)")


def _runs(uri: str):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("torchperf-tui")
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


async def test_a_finished_run_is_logged_to_mlflow_with_its_history_id(tmp_path, monkeypatch):
    from torchperf_tui.engine.records.history_file import HistoryFile

    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    uri, path = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "runs.jsonl"
    app = make_app(warmup=1, iters=5, history_path=str(path), mlflow_uri=uri)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: any(s.title == "MLflow" for s in shown_notifications(app)),
                         what="the store opened")
        await choose_model(pilot)
        await pilot.press("r")
        await wait_until(pilot, lambda: any(s.message.startswith("logged: timing") for s in shown_notifications(app)),
                         what="the run logged to MLflow")
        runs = _runs(uri)
        assert len(runs) == 1
        data = runs[0].data
        assert data.params["model"] == TINY and data.metrics["n"] == 5 and data.metrics["p50_ms"] > 0
        assert data.tags["torchperf.record_id"] == HistoryFile(str(path)).load().records[-1].id
        assert data.tags["env.torch"]


async def test_a_store_that_cannot_be_used_is_one_error_and_the_app_runs_on(tmp_path):
    app = make_app(mlflow_uri="ftp://nowhere/x")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: any(s.title == "MLflow" for s in shown_notifications(app)),
                         what="the MLflow error")
        shown = [s for s in shown_notifications(app) if s.title == "MLflow"]
        assert shown[0].severity == "error" and "scheme 'ftp'" in shown[0].message
        assert "runs are not logged to MLflow" in shown[0].message
        assert app.is_running
