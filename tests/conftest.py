"""Shared test set-up: `gpu`-marked tests need a real CUDA device and are skipped cleanly without one."""

from __future__ import annotations

import os

import pytest

# The CLI's output is 200 columns wide in a pipe unless COLUMNS says otherwise; pytest-xdist's workers inherit
# COLUMNS=80 from execnet, so the tests that read whole lines would depend on how they were started.
os.environ.pop("COLUMNS", None)


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none on this machine)")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_history(tmp_path, monkeypatch):
    """Runs made by tests go to a history file of their own, never the user's; so do measured ceilings."""
    monkeypatch.setenv("TORCHPERF_HISTORY", str(tmp_path / "history.jsonl"))
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(tmp_path / "ceilings.json"))
