"""Hostile paths for every small file the app reads back or keeps (issue 32, findings 1, 4, 9 and 12): the ceilings
file, the catalogue cache, a baseline and the history are read one way (core/input_files.py): a FIFO is
refused without waiting, /dev/zero or a huge file without reading it; a ceilings value that is not a finite positive
rate is never a ceiling; where a file will be written is checked before anything is measured, a link there is
refused, not replaced; no output is written over the history in use or the ceilings file; a write that fails on a
full disk leaves no temporary file and no half record."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.records import make_record
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements import ceiling_measurement
from torchperf_tui.engine.hardware.ceilings import (Ceiling, CeilingsFileError, CeilingsPathError, CeilingsResult,
                                                    device_key, kept_for, load_ceilings, save_ceilings)
from torchperf_tui.engine.measurements.ceiling_measurement import ceilings
from torchperf_tui.engine.records import history_file
from torchperf_tui.core import output_files
from torchperf_tui.engine.records.baseline import BaselineError, resolve_baseline
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.core.input_files import InputFileError, NotJsonError, read_json, read_small
from torchperf_tui.core.kept_files import CEILINGS, kept_file_at
from torchperf_tui.core.output_files import OutputPathError, check_output_path, write_output, write_text
from torchperf_tui.engine.workloads import catalogue_cache
from torchperf_tui.engine.workloads.model_entry import ModelEntry

posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"),
                                reason="needs POSIX FIFOs and devices")
NOT_FILES = [("FIFO", "a named pipe (FIFO)"), ("/dev/zero", "a character device"), ("/dev/full", "a character device")]
ENTRIES = [ModelEntry("timm:resnet18", "classification", (3, 224, 224), source="timm")]
KEY = device_key(torch.device("cpu"))


def not_a_file(tmp_path, path: str) -> str:
    """A path of NOT_FILES (or "DIR") made real: "FIFO" a named pipe in tmp_path, "DIR" tmp_path itself."""
    if path == "FIFO":
        os.mkfifo(tmp_path / "fifo")
        return str(tmp_path / "fifo")
    return str(tmp_path) if path == "DIR" else path


def in_child(code: str, env: dict | None = None, timeout: float = 60) -> str:
    """`code` run in a new interpreter with 1 GiB of address space and a time limit: reading /dev/zero never ends
    and a FIFO blocks for ever, which neither a thread nor this process could stop. Its stdout, stripped."""
    head = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    try:
        done = subprocess.run([sys.executable, "-c", head + textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail("still reading after the time limit: the file was waited on or read without end")
    assert done.returncode == 0, done.stderr[-800:]
    return done.stdout.strip()


def refusal_in_child(imported: str, call: str, env: dict | None = None) -> str:
    """What `call` (with `imported` from torchperf_tui) says as it refuses, in a child as in_child runs it."""
    return in_child(f"""
        from torchperf_tui.core.errors import TorchperfError
        from torchperf_tui.{imported}
        try:
            {call}
        except TorchperfError as exc:
            print(exc)
        """, env=env)


def _valid_ceilings(**changes) -> dict:
    entry = {"device": "cpu", "key": KEY, "measured_at": 1.0, "format": 2, "seconds": 3.0, "ceilings": [
        {"kind": "compute", "dtype": "float32", "value": 3.2e11, "size": "64x64x64", "median_s": 0.05, "reps": 10,
         "workload": "matmul", "threads": 2, "tried": [{"workload": "matmul", "size": "64x64x64", "threads": 2,
                                                          "value": 3.2e11, "median_s": 0.05, "reps": 10}]},
        {"kind": "copy", "dtype": "float32", "value": 2.6e10, "size": "1 MiB", "median_s": 0.02, "reps": 10}]}
    entry["ceilings"][0].update(changes)
    return {"devices": {KEY: entry}}


@pytest.fixture
def measured(monkeypatch):
    """measure_ceilings replaced by a fake that counts its calls: a test says whether anything was measured."""
    calls = []

    def fake(device="auto", **options):
        calls.append(device)
        return CeilingsResult(device="cpu", key=KEY, measured_at=2.0,
                              ceilings=[Ceiling("compute", "float32", 1e11, "64x64x64", 0.01, 3)])

    monkeypatch.setattr(ceiling_measurement, "measure_ceilings", fake)
    return calls


def _read_only_folder(tmp_path, monkeypatch):
    """A folder nothing may be created in: its mode, and for root (whom a mode does not stop) access() as a
    read-only mount answers it."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == str(folder)
                            else real(p, mode, **kw))
    return folder


# --------------------------------------------------------------------------------------------------------
# One way to read a small file


@posix_only
@pytest.mark.parametrize("path, kind", [*NOT_FILES, ("DIR", "a directory")])
def test_a_small_file_that_is_not_a_regular_file_is_refused_without_waiting_or_reading(tmp_path, path, kind):
    path = not_a_file(tmp_path, path)
    said = refusal_in_child("core.input_files import read_json", f'read_json({path!r}, "the state file", 1 << 20)')
    assert said == f"the state file {path} is {kind}, not a regular file"


def test_a_small_file_is_read_whole_under_its_cap_and_refused_over_it(tmp_path):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(100 << 20)  # sparse: 100 MiB that would all be read
    with pytest.raises(InputFileError, match=r"the state file .*huge.json is 100.0 MiB, over the 1.0 MiB it may take"):
        read_small(huge, "the state file", 1 << 20)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert read_json(empty, "the state file", 1 << 20) is None  # nothing kept in it yet
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"devices": [1,')
    with pytest.raises(NotJsonError, match="is not JSON"):
        read_json(garbage, "the state file", 1 << 20)
    (tmp_path / "deep.json").write_text("[" * 200_000)
    with pytest.raises(NotJsonError, match="nested too deeply"):
        read_json(tmp_path / "deep.json", "the state file", 1 << 20)
    (tmp_path / "link.json").symlink_to(garbage)  # a link to a regular file is read: it is not written
    assert read_small(tmp_path / "link.json", "the state file", 1 << 20) == b'{"devices": [1,'
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError):
        read_small(tmp_path / "dangling.json", "the state file", 1 << 20)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_a_file_whose_size_says_nothing_is_still_read_no_further_than_its_cap():
    # /proc files say 0 bytes and hold more: the read stops at the cap, not at the end of what they hold.
    with pytest.raises(InputFileError, match="is more than that, over the 16 B it may take"):
        read_small("/proc/self/status", "the state file", 16)


# --------------------------------------------------------------------------------------------------------
# The ceilings file (finding 1)


# The files a variable names (finding 1): what the refusal calls the file, its variable, and what reads it (the
# ceilings: kept_for's read, without the torch it needs for the device's key).
NAMED_BY_VARIABLE = [
    ("the ceilings file", "TORCHPERF_CEILINGS",
     "engine.hardware.ceilings import load_ceilings", 'load_ceilings("a device")'),
    ("the catalogue cache", "TORCHPERF_CATALOGUE_CACHE",
     "engine.workloads.catalogue_cache import cached", 'cached("timm", lambda: [])'),
]


@posix_only
@pytest.mark.parametrize("path, kind", NOT_FILES)
@pytest.mark.parametrize("what, variable, imported, call", NAMED_BY_VARIABLE, ids=["ceilings", "catalogue-cache"])
def test_a_file_named_by_its_variable_that_is_no_file_is_one_line_not_a_hang_or_all_the_memory(
        tmp_path, path, kind, what, variable, imported, call):
    path = not_a_file(tmp_path, path)
    said = refusal_in_child(imported, call, env={variable: path})
    assert said == f"{what} (${variable}) {path} is {kind}, not a regular file"


def test_a_ceilings_folder_or_huge_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(tmp_path))
    with pytest.raises(CeilingsPathError, match="is a directory, not a regular file"):
        load_ceilings(KEY)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(100 << 20)
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(huge))
    with pytest.raises(CeilingsPathError, match="is 100.0 MiB, over the 16.0 MiB it may take"):
        load_ceilings(KEY)


@pytest.mark.parametrize("value, problem", [
    ("fast", "value is not a finite number: 'fast'"), (None, "value is not a finite number: None"),
    (float("nan"), "value is not a finite number: nan"), (float("inf"), "value is not a finite number: inf"),
    (-1.0, "value is -1.0, not a positive number"), (0, "value is 0, not a positive number")])
def test_a_ceiling_that_is_not_a_finite_positive_rate_is_never_shown_as_one(tmp_path, monkeypatch, value, problem):
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(_valid_ceilings(value=value)))  # JSON's NaN and Infinity, as Python writes them
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    with pytest.raises(CeilingsFileError, match="the entry of this device is corrupt") as caught:
        load_ceilings(KEY)
    assert problem in str(caught.value) and "ceilings --refresh" in str(caught.value)
    said = []
    assert kept_for("cpu", on_corrupt=said.append) is None and len(said) == 1  # absent, said in one line
    with pytest.raises(CeilingsFileError):
        ceilings("cpu")  # not asked to measure again: said, not measured over


@pytest.mark.parametrize("change, problem", [
    ({"median_s": float("inf")}, "median_s is not a finite number"), ({"reps": -3}, "reps is -3"),
    ({"threads": 0}, "threads is 0"), ({"kind": "fastest"}, "kind is 'fastest'"), ({"dtype": None}, "dtype is None"),
    ({"tried": [{"workload": "matmul", "size": "1", "threads": None, "value": -5.0}]}, "value is -5.0")])
def test_every_field_of_a_kept_ceiling_is_checked(tmp_path, change, problem):
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(_valid_ceilings(**change)))
    with pytest.raises(CeilingsFileError, match="corrupt") as caught:
        load_ceilings(KEY, path)
    assert problem in str(caught.value)


def test_a_valid_file_still_reads_and_a_later_versions_fields_are_left_out(tmp_path):
    path = tmp_path / "ceilings.json"
    data = _valid_ceilings()
    data["devices"][KEY]["ceilings"][1]["colour"] = "blue"  # a field this version does not know
    path.write_text(json.dumps(data))
    kept = load_ceilings(KEY, path)
    assert kept.compute("float32").value == 3.2e11 and kept.copy().value == 2.6e10 and kept.cached
    assert kept.compute("float32").tried[0].value == 3.2e11


def test_refresh_replaces_a_corrupt_entry_and_keeps_the_other_devices(tmp_path, measured):
    path = tmp_path / "ceilings.json"
    data = _valid_ceilings(value="fast")
    data["devices"]["Other GPU | torch x"] = _valid_ceilings()["devices"][KEY]
    path.write_text(json.dumps(data))
    result = ceilings("cpu", refresh=True, path=path)
    assert measured == ["cpu"] and result.compute("float32").value == 1e11
    kept = json.loads(path.read_text())["devices"]
    assert set(kept) == {KEY, "Other GPU | torch x"} and load_ceilings(KEY, path).compute("float32").value == 1e11


@pytest.mark.parametrize("make", ["symlink", "dangling-symlink", "read-only-folder", "folder-is-a-file"])
def test_where_ceilings_are_kept_is_checked_before_anything_is_measured(tmp_path, monkeypatch, measured, make):
    real = tmp_path / "real.json"
    if make == "symlink":
        real.write_text(json.dumps({"devices": {}}))
        path = tmp_path / "link.json"
        path.symlink_to(real)
    elif make == "dangling-symlink":
        path = tmp_path / "link.json"
        path.symlink_to(real)
    elif make == "read-only-folder":
        path = _read_only_folder(tmp_path, monkeypatch) / "ceilings.json"
    else:
        (tmp_path / "a-file").write_text("mine")
        path = tmp_path / "a-file" / "ceilings.json"
    with pytest.raises(CeilingsPathError, match="nothing was measured"):
        ceilings("cpu", refresh=True, path=path)
    assert measured == []  # refused before, not after, the measurement
    if make == "symlink":
        assert path.is_symlink() and real.read_text() == json.dumps({"devices": {}})  # refused, not replaced
    if make == "dangling-symlink":
        assert path.is_symlink() and not real.exists()


def test_a_ceilings_file_that_cannot_be_written_whole_is_left_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(_valid_ceilings()))
    before = path.read_text()

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    result = CeilingsResult(device="cpu", key="Other | torch x", measured_at=2.0,
                            ceilings=[Ceiling("copy", "float32", 1e10, "1 MiB", 0.01, 3)])
    with pytest.raises(TorchperfError, match="No space left on device"):
        save_ceilings(result, path)
    assert path.read_text() == before and sorted(os.listdir(tmp_path)) == ["ceilings.json"]


# --------------------------------------------------------------------------------------------------------
# The catalogue cache (finding 1)


@posix_only
def test_a_catalogue_cache_at_its_default_place_that_is_no_file_is_listed_around(tmp_path, monkeypatch):
    fifo = tmp_path / "catalogue.json"
    os.mkfifo(fifo)
    monkeypatch.delenv("TORCHPERF_CATALOGUE_CACHE")
    monkeypatch.setattr(catalogue_cache, "cache_path", lambda: fifo)
    assert catalogue_cache.cached("timm", lambda: list(ENTRIES)) == ENTRIES  # not waited on, not replaced
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_catalogue_cache_never_replaces_a_link_nor_the_history(tmp_path, monkeypatch):
    history = tmp_path / "history.jsonl"
    HistoryFile(history).append(make_record())
    before = history.read_bytes()
    monkeypatch.setenv("TORCHPERF_HISTORY", str(history))
    monkeypatch.setenv("TORCHPERF_CATALOGUE_CACHE", str(history))
    assert catalogue_cache.cached("timm", lambda: list(ENTRIES)) == ENTRIES
    assert history.read_bytes() == before
    link = tmp_path / "cache.json"
    link.symlink_to(tmp_path / "nowhere.json")
    monkeypatch.setenv("TORCHPERF_CATALOGUE_CACHE", str(link))
    assert catalogue_cache.cached("timm", lambda: list(ENTRIES)) == ENTRIES
    assert link.is_symlink() and not (tmp_path / "nowhere.json").exists()


# --------------------------------------------------------------------------------------------------------
# A baseline file


@posix_only
def test_a_baseline_that_is_a_fifo_or_a_device_is_one_line_not_a_hang(tmp_path):
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    said = in_child(f"""
        from torchperf_tui.engine.records.baseline import BaselineError, resolve_baseline
        for ref in ({str(fifo)!r}, "/dev/zero"):
            try:
                resolve_baseline(ref)
            except BaselineError as exc:
                print(exc)
        """)
    assert said.splitlines() == [f"the baseline {fifo} is a named pipe (FIFO), not a regular file",
                                 "the baseline /dev/zero is a character device, not a regular file"]
    with pytest.raises(BaselineError, match="is a directory, not a regular file"):
        resolve_baseline(str(tmp_path) + os.sep)


# --------------------------------------------------------------------------------------------------------
# No output over a file the app keeps (finding 4)


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A history in use with a record in it, and a ceilings file: (history, ceilings)."""
    return keep_history_and_ceilings(tmp_path, monkeypatch)


def keep_history_and_ceilings(tmp_path, monkeypatch):
    """A history in use with a record in it and a ceilings file with this device's, both under tmp_path/data and
    named by their environment variables: (history, ceilings)."""
    (tmp_path / "data").mkdir()
    history, ceilings_file = tmp_path / "data" / "history.jsonl", tmp_path / "data" / "ceilings.json"
    HistoryFile(history).append(make_record())
    ceilings_file.write_text(json.dumps(_valid_ceilings()))
    monkeypatch.setenv("TORCHPERF_HISTORY", str(history))
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(ceilings_file))
    return history, ceilings_file


def test_no_output_is_written_over_the_history_or_the_ceilings_by_any_name(tmp_path, kept):
    history, ceilings_file = kept
    before = history.read_bytes(), ceilings_file.read_bytes()
    os.link(history, tmp_path / "hard.jsonl")
    (tmp_path / "linked").symlink_to(tmp_path / "data")
    names = {history: "the history file in use", tmp_path / "data" / ".." / "data" / "history.jsonl":
             "the history file in use", tmp_path / "hard.jsonl": "the history file in use",
             tmp_path / "linked" / "history.jsonl": "the history file in use", ceilings_file: "the ceilings file"}
    for path, name in names.items():
        with pytest.raises(OutputPathError, match=f"it is {name}, and would lose what it keeps"):
            write_text(path, "an export")
    assert (history.read_bytes(), ceilings_file.read_bytes()) == before
    assert not [n for n in os.listdir(tmp_path / "data") if n.endswith(".tmp")]
    write_text(ceilings_file, json.dumps(_valid_ceilings()), own=CEILINGS)  # its own writer may replace it
    assert kept_file_at(tmp_path / "export.csv") is None


def test_a_history_not_made_yet_is_not_written_over_either(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPERF_HISTORY", str(tmp_path / "later.jsonl"))
    with pytest.raises(OutputPathError, match="the history file in use"):
        check_output_path(tmp_path / "." / "later.jsonl")


def test_a_history_that_is_the_ceilings_file_takes_no_record(kept, monkeypatch):
    _, ceilings_file = kept
    before = ceilings_file.read_bytes()
    for call in (HistoryFile(ceilings_file).check_writable, lambda: HistoryFile(ceilings_file).append(make_record())):
        with pytest.raises(TorchperfError, match="is the ceilings file: runs are not appended to it"):
            call()
    assert ceilings_file.read_bytes() == before


# --------------------------------------------------------------------------------------------------------
# A full disk (finding 9)


def test_a_writer_that_fails_leaves_no_temporary_file_nor_what_it_made_beside_it(tmp_path):
    def kineto_on_a_full_disk(temp: str) -> None:
        # Kineto writes a trace to '<path>.tmp' and renames it when done; on a full disk it logs, and leaves it.
        with open(temp + ".tmp", "wb") as fh:
            fh.write(b"x" * 61_000)

    with pytest.raises(OutputPathError, match="nothing was written"):
        write_output(tmp_path / "trace.json", kineto_on_a_full_disk)
    assert os.listdir(tmp_path) == []

    def full_disk(temp: str) -> None:
        with open(temp, "wb") as fh:
            fh.write(b"half a trace")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    (tmp_path / "trace.json").write_text("the old trace")
    with pytest.raises(OutputPathError, match="No space left on device"):
        write_output(tmp_path / "trace.json", full_disk)
    assert os.listdir(tmp_path) == ["trace.json"] and (tmp_path / "trace.json").read_text() == "the old trace"


@pytest.mark.parametrize("written_first", [1, 7, 100])
def test_a_history_append_cut_short_by_a_full_disk_leaves_the_file_as_it_was(tmp_path, monkeypatch, written_first):
    path = tmp_path / "history.jsonl"
    HistoryFile(path).append(make_record())
    before = path.read_bytes()
    real_write = os.write
    calls = []

    def full_after_a_few_bytes(fd, data):
        calls.append(len(data))
        if len(calls) == 1 and written_first:
            return real_write(fd, bytes(data[:written_first]))  # a short write: part of the line went in
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(history_file.os, "write", full_after_a_few_bytes)
    with pytest.raises(TorchperfError, match="No space left on device"):
        HistoryFile(path).extend([make_record(), make_record()])
    monkeypatch.undo()
    assert path.read_bytes() == before  # all or nothing: no half record for a reader to meet
    loaded = HistoryFile(path).load()
    assert len(loaded.records) == 1 and loaded.skipped == 0


def test_a_history_ending_in_a_torn_line_is_mended_and_still_all_or_nothing(tmp_path, monkeypatch):
    path = tmp_path / "history.jsonl"
    HistoryFile(path).append(make_record())
    with open(path, "ab") as fh:
        fh.write(b'{"id": "torn')  # a writer killed mid-line, before this fix
    before = path.read_bytes()
    real_write = os.write

    def full_after_the_newline(fd, data):
        if bytes(data[:1]) == b"\n":
            real_write(fd, b"\n")  # the newline that ends the torn line went in, then the disk was full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(history_file.os, "write", full_after_the_newline)
    with pytest.raises(TorchperfError):
        HistoryFile(path).append(make_record())
    monkeypatch.undo()
    assert path.read_bytes() == before
    HistoryFile(path).append(make_record())
    loaded = HistoryFile(path).load()
    assert len(loaded.records) == 2 and loaded.skipped == 1  # the torn line skipped, counted, said once


# --------------------------------------------------------------------------------------------------------
# The history checked before a run (finding 12)


@pytest.mark.parametrize("make, said", [
    ("fifo", "is a named pipe (FIFO), not a regular file"), ("dir", "is a directory, not a regular file"),
    ("symlink", "is a symbolic link, not a regular file"), ("dangling-symlink", "is a symbolic link"),
    ("dev-full", "is a character device"), ("read-only-folder", "is not writable"),
    ("folder-is-a-file", "is not a folder")])
def test_a_history_that_cannot_take_a_record_is_said_before_the_run_and_nothing_is_made(tmp_path, monkeypatch,
                                                                                         make, said):
    if make == "fifo":
        path = tmp_path / "h.fifo"
        os.mkfifo(path)
    elif make == "dir":
        path = tmp_path
    elif make in ("symlink", "dangling-symlink"):
        path = tmp_path / "h.jsonl"
        if make == "symlink":
            (tmp_path / "notes.txt").write_text("mine")
        path.symlink_to(tmp_path / "notes.txt")
    elif make == "dev-full":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full here")
        path = "/dev/full"
    elif make == "read-only-folder":
        path = _read_only_folder(tmp_path, monkeypatch) / "new" / "h.jsonl"
    else:
        (tmp_path / "a-file").write_text("mine")
        path = tmp_path / "a-file" / "h.jsonl"
    listing = sorted(os.listdir(tmp_path))
    with pytest.raises(TorchperfError, match=re.escape(f"the history file {path}") + ".*" + re.escape(said)):
        HistoryFile(path).check_writable()
    assert sorted(os.listdir(tmp_path)) == listing  # nothing created, nothing written


def test_a_history_that_can_take_a_record_passes_and_is_left_untouched(tmp_path):
    HistoryFile(tmp_path / "new" / "deeper" / "h.jsonl").check_writable()  # made at the first append
    assert os.listdir(tmp_path) == []
    path = tmp_path / "h.jsonl"
    HistoryFile(path).append(make_record())
    before = os.stat(path)
    HistoryFile(path).check_writable()
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_mtime_ns == before.st_mtime_ns
