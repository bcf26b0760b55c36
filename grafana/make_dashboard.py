"""Writes grafana/torchperf-dashboard.json: the Grafana dashboard over what `torchperf-tui exporter` serves.

    python grafana/make_dashboard.py            # rewrite the JSON beside this script

GPU panels use DCGM exporter's names, so they also chart a dcgm-exporter's GPUs; outcome panels chart the history's
newest record per set-up, one line per model, dtype, flag set and host. The Prometheus data source is a variable
($datasource), so the dashboard imports into any Grafana. tests/exporter/test_dashboard.py checks that the JSON is
what this script writes and that every metric it queries is one the exporter serves.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).with_name("torchperf-dashboard.json")
DS = {"type": "prometheus", "uid": "${datasource}"}
GPU = 'hostname=~"$hostname", gpu=~"$gpu"'
HOST = 'hostname=~"$hostname"'
OUTCOME = 'host=~"$hostname", model=~"$model", dtype=~"$dtype", flags=~"$flags"'
SETUP = "{{model}} {{model_args}} {{input}} {{dtype}} · {{flags}} · {{device}}@{{host}}"


def _panel(title: str, targets: list[tuple[str, str]], unit: str, x: int, y: int, w: int = 8, h: int = 8,
           kind: str = "timeseries", description: str = "", instant: bool = False) -> dict:
    return {
        "type": kind, "title": title, "description": description, "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {},
        "targets": [{"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i),
                     **({"instant": True, "format": "table"} if instant else {})}
                    for i, (expr, legend) in enumerate(targets)],
    }


def _row(title: str, y: int) -> dict:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
            "panels": []}


def _variable(name: str, label: str, query: str) -> dict:
    return {"type": "query", "name": name, "label": label, "datasource": DS, "query": {"query": query, "refId": name},
            "definition": query, "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "sort": 1}


def dashboard() -> dict:
    gpu_legend = "{{hostname}} GPU {{gpu}} {{modelName}}"
    panels = [
        _row("GPUs (DCGM exporter's names: dcgm-exporter's GPUs chart here too)", 0),
        _panel("GPU utilisation", [(f"DCGM_FI_DEV_GPU_UTIL{{{GPU}}}", gpu_legend)], "percent", 0, 1),
        _panel("GPU memory used of total", [(f"DCGM_FI_DEV_FB_USED{{{GPU}}}", gpu_legend + " used"),
                                            (f"DCGM_FI_DEV_FB_TOTAL{{{GPU}}}", gpu_legend + " total")],
               "decmbytes", 8, 1),
        _panel("Clocks", [(f"DCGM_FI_DEV_SM_CLOCK{{{GPU}}}", gpu_legend + " SM"),
                          (f"DCGM_FI_DEV_MEM_CLOCK{{{GPU}}}", gpu_legend + " memory")], "MHz", 16, 1),
        _panel("Power draw and limit", [(f"DCGM_FI_DEV_POWER_USAGE{{{GPU}}}", gpu_legend),
                                        (f"DCGM_FI_DEV_ENFORCED_POWER_LIMIT{{{GPU}}}", gpu_legend + " limit")],
               "watt", 0, 9),
        _panel("Power from the energy counter", [(f"rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}[5m]) / 1000",
                                                  gpu_legend)], "watt", 8, 9,
               description="The total energy counter's rate (mJ/s / 1000): the mean power over 5 minutes."),
        _panel("Temperature", [(f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}}", gpu_legend)], "celsius", 16, 9),
        _panel("Throttled (a reason that slows a workload)", [(f"torchperf_gpu_throttled{{{GPU}}}", gpu_legend)],
               "bool_yes_no", 0, 17, kind="state-timeline"),
        _panel("Clock event reasons holding", [(f"torchperf_gpu_clock_event{{{GPU}}} == 1",
                                                gpu_legend + " {{clock_event}}")], "none", 8, 17,
               kind="state-timeline"),
        _panel("What NVML could not read", [(f"torchperf_gpu_field_unavailable{{{GPU}}}", ""),
                                            (f"torchperf_gpu_up{{{GPU}}} == 0", ""),
                                            (f"torchperf_nvml_available{{{HOST}}} == 0", "")],
               "none", 16, 17, kind="table", instant=True),
        _row("Host", 25),
        _panel("CPU utilisation", [(f"torchperf_host_cpu_utilization_percent{{{HOST}}}", "{{hostname}}")],
               "percent", 0, 26),
        _panel("Load average per CPU", [(f"torchperf_host_load1{{{HOST}}} / torchperf_host_cpu_count{{{HOST}}}",
                                         "{{hostname}} 1m"),
                                        (f"torchperf_host_load5{{{HOST}}} / torchperf_host_cpu_count{{{HOST}}}",
                                         "{{hostname}} 5m"),
                                        (f"torchperf_host_load15{{{HOST}}} / torchperf_host_cpu_count{{{HOST}}}",
                                         "{{hostname}} 15m")], "percentunit", 8, 26),
        _panel("Memory used of total", [(f"torchperf_host_memory_used_bytes{{{HOST}}}", "{{hostname}} used"),
                                        (f"torchperf_host_memory_total_bytes{{{HOST}}}", "{{hostname}} total")],
               "bytes", 16, 26),
        _row("Benchmark outcomes (the history's newest record per set-up)", 34),
        _panel("Latency p50 per set-up", [(f'torchperf_outcome_latency_seconds{{{OUTCOME}, quantile="0.5"}}', SETUP)],
               "s", 0, 35, w=12,
               description="Per pass (per=pass) or per output token (per=token); a step is a new record."),
        _panel("Latency p99 per set-up", [(f'torchperf_outcome_latency_seconds{{{OUTCOME}, quantile="0.99"}}', SETUP)],
               "s", 12, 35, w=12),
        _panel("Samples per second", [(f"torchperf_outcome_samples_per_second{{{OUTCOME}}}", SETUP)], "short", 0, 43,
               w=12, description="Input items per second over the timed iterations; tokens per second for per=token."),
        _panel("Energy per inference", [(f"torchperf_outcome_energy_joules_per_item{{{OUTCOME}}}", SETUP)], "joule",
               12, 43, w=12, description="GPU energy over the timed windows per item, where the run measured it."),
        _panel("Latest outcomes", [
            (f'torchperf_outcome_latency_seconds{{{OUTCOME}, quantile="0.5"}}', ""),
            (f'torchperf_outcome_latency_seconds{{{OUTCOME}, quantile="0.9"}}', ""),
            (f'torchperf_outcome_latency_seconds{{{OUTCOME}, quantile="0.99"}}', ""),
            (f"torchperf_outcome_samples_per_second{{{OUTCOME}}}", ""),
            (f"torchperf_outcome_timed_samples{{{OUTCOME}}}", ""),
            (f"torchperf_outcome_timestamp_seconds{{{OUTCOME}}} * 1000", ""),
        ], "none", 0, 51, w=24, h=10, kind="table", instant=True),
        _panel("History file", [("torchperf_history_records", "{{instance}} records"),
                                ("torchperf_history_setups", "{{instance}} set-ups"),
                                ("torchperf_history_skipped_lines", "{{instance}} skipped lines"),
                                ("torchperf_history_readable", "{{instance}} readable"),
                                ("torchperf_exporter_reading_errors", "{{instance}} failed readings")],
               "none", 0, 61, w=24, h=6, kind="stat"),
    ]
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
    datasource = {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus",
                  "current": {}, "hide": 0, "refresh": 1}
    return {
        "title": "torchperf-tui: GPUs, host and benchmark outcomes",
        "uid": "torchperf-tui",
        "description": "What `torchperf-tui exporter` serves: GPU telemetry (DCGM exporter's names), the host, and "
                       "the newest benchmark outcome per set-up from each box's history.",
        "tags": ["torchperf-tui", "gpu", "pytorch", "benchmark"],
        "schemaVersion": 39, "version": 1, "editable": True, "graphTooltip": 1, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"}, "timezone": "",
        "templating": {"list": [
            datasource,
            _variable("hostname", "Host", "label_values(torchperf_host_cpu_count, hostname)"),
            _variable("gpu", "GPU", 'label_values(DCGM_FI_DEV_GPU_UTIL{hostname=~"$hostname"}, gpu)'),
            _variable("model", "Model", "label_values(torchperf_outcome_latency_seconds, model)"),
            _variable("dtype", "dtype", 'label_values(torchperf_outcome_latency_seconds{model=~"$model"}, dtype)'),
            _variable("flags", "Flag set", 'label_values(torchperf_outcome_latency_seconds{model=~"$model"}, flags)'),
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
