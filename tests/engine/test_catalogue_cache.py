"""The timm and transformers catalogues are listed once per installed version and read back after."""

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
