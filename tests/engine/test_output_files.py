"""Files the app writes: beside the target, then renamed; a target that is not a regular file is refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from torchperf_tui.core.output_files import OutputPathError, check_output_path, write_output, write_text


def _no_temporaries(folder) -> bool:
    return not [n for n in os.listdir(folder) if n.endswith(".tmp")]


def test_a_new_file_is_written_whole_with_the_usual_mode(tmp_path):
    target = tmp_path / "out.txt"
    assert write_text(target, "hello") == target
    assert target.read_text() == "hello" and _no_temporaries(tmp_path)
    assert stat.S_IMODE(os.stat(target).st_mode) & 0o644 == 0o644


def test_an_existing_regular_file_is_replaced_and_keeps_its_mode(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    os.chmod(target, 0o600)
    write_text(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(os.stat(target).st_mode) == 0o600


@pytest.mark.parametrize("kind", ["dir", "fifo", "symlink", "dangling-symlink"])
def test_what_is_not_a_regular_file_is_refused_and_left_alone(tmp_path, kind):
    target = tmp_path / "target"
    if kind == "dir":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        (tmp_path / "real").write_text("keep")
        target.symlink_to(tmp_path / "real")
    else:
        target.symlink_to(tmp_path / "nowhere")
    before = os.lstat(target)
    with pytest.raises(OutputPathError, match="not a regular file"):
        write_text(target, "data")
    after = os.lstat(target)
    assert after.st_ino == before.st_ino and stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode)
    assert _no_temporaries(tmp_path)
    if kind == "symlink":
        assert (tmp_path / "real").read_text() == "keep"


def test_a_device_node_is_refused_without_touching_it():
    with pytest.raises(OutputPathError, match="character device"):
        write_text("/dev/null", "data")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_missing_folder_is_refused_unless_asked_to_make_it(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    with pytest.raises(OutputPathError, match="does not exist"):
        check_output_path(target)
    write_output(target, lambda temp: Path(temp).write_text("x"), make_parents=True)
    assert target.read_text() == "x"


def test_a_writer_that_fails_or_writes_nothing_leaves_the_target_as_it_was(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def broken(temp: str) -> None:
        with open(temp, "w") as fh:
            fh.write("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputPathError, match="No space left"):
        write_output(target, broken)
    with pytest.raises(OutputPathError, match="nothing was written"):
        write_output(target, lambda temp: None)  # a profiler that logs its failure instead of raising
    assert target.read_text() == "old" and _no_temporaries(tmp_path)


def test_a_directory_appearing_at_the_target_while_writing_is_not_replaced(tmp_path):
    target = tmp_path / "out.txt"

    def racing(temp: str) -> None:
        with open(temp, "w") as fh:
            fh.write("data")
        target.mkdir()

    with pytest.raises(OutputPathError, match="a directory"):
        write_output(target, racing)
    assert target.is_dir() and _no_temporaries(tmp_path)
