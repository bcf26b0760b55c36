"""`--mlflow` with a sqlite URI that cannot keep a run: a folder, a FIFO, a device, a read-only folder, a file that is
not a database, a dangling link, or an in-memory database. Each is one line and exit 2 before anything is measured,
at once: MLflow itself retried such a file for 100 s with four lines of warnings each time, and logged an in-memory
run, said "logged" and lost it when the command ended."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from tests.cli_run import run
from torchperf_tui.engine.records.mlflow_store import MlflowStoreError, check_uri

TINY = ["tests.tinymodels:tiny_cnn", "--input", "1,3,16,16", "--device", "cpu"]
NOBODY = 65534


def refusal(uri: str) -> str:
    with pytest.raises(MlflowStoreError) as caught:
        check_uri(uri)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("uri", ["sqlite://", "sqlite:///", "sqlite:///:memory:",
                                 "sqlite:///file:runs?mode=memory&uri=true"])
def test_an_in_memory_database_is_refused_it_would_be_lost(uri):
    assert "is an in-memory database: the run would be lost when the command ends" in refusal(uri)


def test_what_is_not_a_database_file_is_refused(tmp_path):
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "notes.txt").write_text("not a database\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone.db")
    (tmp_path / "to-folder").symlink_to(tmp_path / "folder")
    assert "folder is a directory, not a database file" in refusal(f"sqlite:///{tmp_path / 'folder'}")
    assert "fifo is a FIFO, not a database file" in refusal(f"sqlite:///{tmp_path / 'fifo'}")
    assert "/dev/null is a character device" in refusal("sqlite:////dev/null")
    assert "notes.txt is not a sqlite database" in refusal(f"sqlite:///{tmp_path / 'notes.txt'}")
    assert "dangling is a symbolic link to nothing" in refusal(f"sqlite:///{tmp_path / 'dangling'}")
    assert "to-folder is a directory" in refusal(f"sqlite:///{tmp_path / 'to-folder'}")
    assert "a sqlite URI has no host" in refusal(f"sqlite://host{tmp_path / 'm.db'}")
    assert "read-only (mode=ro)" in refusal(f"sqlite:///{tmp_path / 'm.db'}?mode=ro")


def test_a_new_or_existing_database_and_a_link_to_one_pass(tmp_path):
    import sqlite3

    assert check_uri(f"sqlite:///{tmp_path / 'new.db'}") == f"sqlite:///{tmp_path / 'new.db'}"
    sqlite3.connect(tmp_path / "old.db").execute("create table t (x)").connection.close()
    (tmp_path / "link.db").symlink_to(tmp_path / "old.db")
    check_uri(f"sqlite:///{tmp_path / 'old.db'}")
    check_uri(f"sqlite:///{tmp_path / 'link.db'}")
    (tmp_path / "empty.db").write_bytes(b"")  # sqlite makes a database of an empty file
    check_uri(f"sqlite:///{tmp_path / 'empty.db'}")


def _in_a_child_without_root(check) -> str:
    """What `check()` raised (type: message), '' if nothing, run in a forked child that, under root, first becomes
    nobody: root writes through a read-only folder's mode bits, as MLflow did here."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest from here on, only os._exit
        try:
            os.close(read)
            if os.geteuid() == 0:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            try:
                check()
                said = ""
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                said = f"{type(exc).__name__}: {exc}"
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        said = fh.read().decode()
    os.waitpid(pid, 0)
    return said


def test_a_read_only_folder_is_refused():
    top = Path(tempfile.mkdtemp())  # not pytest's tmp_path: its parents are closed to another user
    try:
        top.chmod(0o755)
        (top / "ro").mkdir(mode=0o555)
        (top / "ro").chmod(0o555)
        said = _in_a_child_without_root(lambda: check_uri(f"sqlite:///{top / 'ro' / 'm.db'}"))
        assert said.startswith("MlflowStoreError: ") and f"cannot write in the folder {top / 'ro'}" in said, said
    finally:
        (top / "ro").chmod(0o755)
        (top / "ro").rmdir()
        top.rmdir()


@pytest.mark.parametrize("target, words", [
    ("folder", "is a directory, not a database file"),
    ("fifo", "is a FIFO, not a database file"),
    (None, "is an in-memory database"),
])
def test_the_cli_refuses_in_one_line_at_once_and_measures_nothing(capsys, tmp_path, target, words):
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    uri = f"sqlite:///{tmp_path / target}" if target else "sqlite://"
    start = time.monotonic()
    for command in (["bench", *TINY, "--iters", "2"], ["compare", *TINY, "--a", "threads=1", "--b", "threads=2"]):
        code, out, err = run(capsys, *command, "--mlflow", uri)
        assert code == 2 and out == "" and err.count("\n") == 1 and words in err, (command, err)
    assert time.monotonic() - start < 20  # no retries (MLflow's took 100 s)
    assert not (tmp_path / "history.jsonl").exists()  # refused before the measurement
