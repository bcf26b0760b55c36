"""Refusals of the CLI met by probing it as a user would (issue 21): each is exit 2 and one line on stderr,
before any time is spent measuring."""

from __future__ import annotations

import pytest

from tests.test_cli import TINY, run


def refused(capsys, *argv) -> str:
    """Run the CLI; assert it refused in one line with exit 2 and printed nothing on stdout; return the line."""
    code, out, err = run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert out == "" and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_flag_given_twice_in_one_arm_is_refused(capsys):
    line = refused(capsys, "compare", TINY, "--input", "1x3x8x8", "--a", "mkldnn=on,mkldnn=off", "--b", "",
                   "--blocks", "6", "--per-block", "1", "--no-history")
    assert "mkldnn given twice" in line
