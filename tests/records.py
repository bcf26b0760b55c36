"""Synthetic run records for the history tests: stats given outright, so comparisons have known answers."""

from __future__ import annotations

from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_records import HistoryRecord, new_record_id
from torchperf_tui.core.stats import TimingStats

ENV = {"device_name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "torch": "2.14.1", "cuda_runtime": "12.8",
       "cudnn": "9.13.0", "hostname": "box", "python": "3.11.9"}


def make_record(p50: float = 10.0, p99: float = 20.0, *, flags: dict | None = None, dtype: str = "float32",
                model: str = "resnet18", env: dict | None = None, record_id: str | None = None) -> HistoryRecord:
    """A synthetic record whose stats are given outright, so comparisons have known answers."""
    stats = TimingStats(n=3, mean_ms=p50 + 1, std_ms=0.5, min_ms=p50 - 1, max_ms=p99, p50_ms=p50, p90_ms=p50 + 2,
                        p99_ms=p99, iqr_ms=1.0, fps=1000.0 / (p50 + 1), first_iter_ms=120.0)
    return HistoryRecord(id=record_id or new_record_id(), kind="timing", created_at="2026-11-22T20:30:00+00:00",
                     model=model, input_shape=(1, 3, 224, 224), dtype=dtype, channels_last=False, device="cuda:0",
                     flags=flags if flags is not None else Flags().to_dict(), flags_text="defaults",
                     stats=stats, samples_ms=[p50 - 1, p50, p99], fingerprint=dict(env or ENV),
                     duration_s=1.5, timer="cuda-events", details={"compile_mode": None})
