"""The torchvision, timm and transformers catalogues are listed once per installed version and read back after."""

from __future__ import annotations

from torchperf_tui.engine.workloads import catalogue_cache
from torchperf_tui.engine.workloads.model_entry import ModelEntry

ENTRIES = [ModelEntry("timm:resnet18", "classification", (3, 224, 224), source="timm"),
           ModelEntry("timm:odd", "classification", (3, 1, 1), False, "not supported", source="timm")]


def test_a_listing_is_kept_per_version_and_listed_again_when_it_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPERF_CATALOGUE_CACHE", str(tmp_path / "cache" / "catalogue.json"))
    calls = []

    def listing():
        calls.append(1)
        return list(ENTRIES)

    assert catalogue_cache.cached("timm", listing) == ENTRIES
    assert catalogue_cache.cached("timm", listing) == ENTRIES and len(calls) == 1  # read back, not listed
    monkeypatch.setattr(catalogue_cache, "version_key", lambda source: "timm 0.0.1")
    assert catalogue_cache.cached("timm", listing) == ENTRIES and len(calls) == 2  # another version: listed again


def test_a_corrupt_or_unwritable_cache_is_listed_again_never_an_error(tmp_path, monkeypatch):
    path = tmp_path / "catalogue.json"
    monkeypatch.setenv("TORCHPERF_CATALOGUE_CACHE", str(path))
    key = catalogue_cache.version_key("timm")
    for text in ("{not json", '{"timm": {"key": "%s", "entries": [{"name": 3}]}}' % key, "[1, 2]"):
        path.write_text(text)
        assert catalogue_cache.cached("timm", lambda: list(ENTRIES)) == ENTRIES
    monkeypatch.setenv("TORCHPERF_CATALOGUE_CACHE", str(tmp_path / "a-file" / "below"))
    (tmp_path / "a-file").write_text("")  # its folder is a file: nothing can be written there
    assert catalogue_cache.cached("timm", lambda: list(ENTRIES)) == ENTRIES


def test_torchvisions_listing_read_back_imports_no_torchvision(tmp_path):
    """Read back from the cache, torchvision's catalogue is the same as listed and costs no import of torchvision
    (which imports torch's compiler with it: 2-3 s of CPU in a process that may never build one of its models)."""
    import json
    import os
    import subprocess
    import sys

    code = """
import json, sys
from torchperf_tui.engine.workloads.model_catalogue import list_models
entries = list_models("torchvision")
print(json.dumps({"imported": "torchvision" in sys.modules, "entries": [[e.name, e.task, list(e.input_shape),
                  e.supported, e.reason] for e in entries]}))
"""
    env = {**os.environ, "TORCHPERF_CATALOGUE_CACHE": str(tmp_path / "catalogue.json")}
    listed, read_back = (json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                                   text=True, timeout=300, check=True).stdout) for _ in range(2))
    assert listed["imported"] and not read_back["imported"]
    assert read_back["entries"] == listed["entries"] and len(listed["entries"]) > 100
    assert any(not supported for _, task, _, supported, _ in listed["entries"] if task == "quantization")


def test_a_kept_listing_with_an_escape_sequence_or_a_dimension_below_one_is_listed_again(tmp_path, monkeypatch):
    """A cache written by something else (another machine, a hand): a model named with an escape sequence would
    reach the terminal through `models` and the picker; a dimension of 0 or -5 would be a model's default input."""
    import json

    path = tmp_path / "catalogue.json"
    monkeypatch.setenv("TORCHPERF_CATALOGUE_CACHE", str(path))
    key = catalogue_cache.version_key("timm")
    for name, shape in (("timm:\x1b[31mevil", [3, 224, 224]), ("timm:resnet18", [3, -5, 224]),
                        ("timm:resnet18", [0, 224, 224])):
        path.write_text(json.dumps({"timm": {"key": key, "entries": [
            {"name": name, "task": "classification", "input_shape": shape, "source": "timm"}]}}))
        assert catalogue_cache.cached("timm", lambda: list(ENTRIES)) == ENTRIES
