"""The Grafana dashboard in grafana/: valid JSON, what its script writes, the Prometheus data source a variable,
and every metric it queries one the exporter serves (scraped here, with GPUs and outcomes that fill every family)."""

from __future__ import annotations

import importlib.util
import json
import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.exporter.helpers import record, served, two_gpus, write_history
from tests.fakes.fake_nvml import NVML_ERROR_NOT_SUPPORTED
from torchperf_tui.engine.hardware.nvml import Nvml

GRAFANA = Path(__file__).resolve().parents[2] / "grafana"
DASHBOARD = GRAFANA / "torchperf-dashboard.json"
METRIC = re.compile(r"\b(?:DCGM_FI_[A-Z0-9_]+|torchperf_[a-z0-9_]+)\b")


def _queries(dashboard: dict) -> list[str]:
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def _served_names(tmp_path) -> set[str]:
    history = tmp_path / "history.jsonl"
    write_history(history, record("resnet18", 10.0, energy_j=0.2))
    fake = two_gpus()
    # one field unavailable, so that family has a sample too
    fake.fail("nvmlDeviceGetPowerUsage", NVML_ERROR_NOT_SUPPORTED, times=1)
    with served(Nvml.open(module=fake), history) as (_, url):
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def test_the_dashboard_is_what_its_script_writes():
    spec = importlib.util.spec_from_file_location("make_dashboard", GRAFANA / "make_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text(encoding="utf-8") == module.render(), "run python grafana/make_dashboard.py"


def test_the_dashboard_queries_only_metrics_the_exporter_serves(tmp_path):
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queried = {name for expr in _queries(dashboard) for name in METRIC.findall(expr)}
    served_names = _served_names(tmp_path)
    assert len(queried) >= 25  # GPU, host and outcome panels, not a stub
    assert not queried - served_names, sorted(queried - served_names)


def test_the_prometheus_data_source_is_a_variable_every_panel_uses():
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"]), panel["title"]
    for name in ("hostname", "gpu", "model", "dtype", "flags"):  # every $variable a query uses is defined
        assert name in variables
    used = {m for expr in _queries(dashboard) for m in re.findall(r"\$(\w+)", expr)}
    assert used <= set(variables), used - set(variables)
