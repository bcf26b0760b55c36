"""Refusals of the CLI met by probing it as a user would (issue 21): each is exit 2 and one line on stderr,
before any time is spent measuring."""

from __future__ import annotations

import pytest

from tests.cli_run import no_job_sent
from tests.test_cli import TINY, run


def refused(capsys, *argv) -> str:
    """Run the CLI; assert it refused in one line with exit 2 and printed nothing on stdout; return the line."""
    code, out, err = run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert out == "" and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def no_job(monkeypatch) -> list:
    """The jobs the command sent to a measurement process (none may be: the refusal comes before any is
    spawned and before torch is imported, 2-3 s)."""
    from torchperf_tui.cli import common

    return no_job_sent(monkeypatch, common, "the arguments were checked")


@pytest.mark.parametrize("argv", [["bench", TINY], ["throughput", TINY], ["profile", TINY], ["roofline", TINY],
                                  ["compare", TINY, "--a", "", "--b", "mkldnn=off"], ["determinism", TINY],
                                  ["memsnap", TINY], ["ceilings"]])
@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cpu:0"])
def test_a_commands_device_is_checked_where_it_enters(capsys, no_job, argv, device):
    line = refused(capsys, *argv, "--device", device)
    assert "--device: unknown device" in line and "use auto, cpu, cuda or cuda:N" in line and not no_job


COMPARE = ("compare", TINY, "--input", "1x3x8x8", "--blocks", "6", "--per-block", "1", "--no-history")


@pytest.mark.parametrize("argv, message", [
    (["bench", TINY, "--cold-l2"], "--cold-l2 goes with --modes"),
    (["bench", TINY, "--modes", "sync,warp"], "unknown timing mode 'warp'"),
    ([*COMPARE, "--a", "", "--b", "mkldnn=off", "--kernels", "--shapes", "cycle:2"], "--kernels profiles one input"),
    ([*COMPARE, "--a", "shapes=cycle:2", "--b", "mkldnn=off", "--kernels"], "leave out --shapes and shapes= in"),
    ([*COMPARE, "--a", "mkldnn=on,mkldnn=off", "--b", ""], "mkldnn given twice"),
    ([*COMPARE, "--a", "benchmark=on,cudnn_benchmark=off", "--b", ""], "set by both benchmark and cudnn_benchmark"),
    ([*COMPARE, "--a", "dtype=int8", "--b", ""], "unknown dtype 'int8'"),
    ([*COMPARE, "--a", "warp=on", "--b", ""], "unknown key 'warp'"),
    ([*COMPARE, "--a", "threads=1", "--b", "threads=1"], "arms A and B are the same flags"),
])
def test_what_the_arguments_alone_refuse_is_refused_before_a_job_is_sent(capsys, no_job, argv, message):
    assert message in refused(capsys, *argv) and not no_job


def test_a_spec_is_refused_in_the_clis_process_without_torch_or_a_measurement_process():
    """The SPECs are parsed in the CLI's process, dtype= included, without torch (2-3 s to import) and before a
    job client is even loaded."""
    import subprocess
    import sys

    script = ("import sys\nfrom torchperf_tui.entry import main\n"
              f"code = main(['compare', {TINY!r}, '--a', 'dtype=fp16,mkldnn=on,mkldnn=off', '--b', ''])\n"
              "print('torch' in sys.modules, 'torchperf_tui.measure.cli_jobs' in sys.modules, code)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False False 2", (proc.stdout, proc.stderr)
    assert proc.stderr.strip().splitlines() == ["torchperf-tui: error: mkldnn given twice in "
                                                "'dtype=fp16,mkldnn=on,mkldnn=off': give each setting once per arm"]


def test_an_arm_with_a_dtype_parsed_in_the_clis_process_runs_it(capsys):
    import json

    code, out, err = run(capsys, *COMPARE, "--a", "", "--b", "dtype=bf16", "--json")
    data = json.loads(out)
    assert code == 0 and data["a"]["dtype"] == "float32" and data["b"]["dtype"] == "bfloat16", err


def test_a_flag_given_twice_in_one_arm_is_refused(capsys):
    line = refused(capsys, "compare", TINY, "--input", "1x3x8x8", "--a", "mkldnn=on,mkldnn=off", "--b", "",
                   "--blocks", "6", "--per-block", "1", "--no-history")
    assert "mkldnn given twice" in line


@pytest.mark.parametrize("argv, message", [
    (["--blocks", "100000"], "--blocks: at most 10,000 blocks per arm"),
    (["--blocks", "5"], "at least 6 blocks per arm"),
    (["--per-block", "5000"], "--per-block: must be at most 1,000"),
    (["--time-budget", "nan"], "--time-budget: expected a finite number"),
    (["--time-budget", "-1"], "--time-budget: must be >= 0"),
])
def test_compare_counts_and_budget_are_checked_where_they_enter(capsys, argv, message):
    assert message in refused(capsys, "compare", TINY, "--input", "1x3x8x8", "--a", "", "--b", "mkldnn=off",
                              "--no-history", *argv)


def test_compare_stops_at_its_time_budget_and_says_so(capsys):
    import json

    code, out, _ = run(capsys, "compare", "tests.engine.test_timing_modes:sleepy", "--input", "2x4", "--a", "",
                       "--b", "mkldnn=off", "--blocks", "10000", "--per-block", "2", "--time-budget", "0.3",
                       "--no-history", "--json")
    data = json.loads(out)
    assert code == 0 and data["out_of_time"].startswith("time budget 0.3 s reached after ")
    assert data["out_of_time"].endswith(" of 10000 block pairs") and len(data["a"]["blocks"]) < 10000
    assert data["out_of_time"] in data["summary"]


@pytest.mark.parametrize("a, b", [("", ""), ("mkldnn=on", ""), ("threads=1", "threads=1"), ("dtype=float32", "")])
def test_two_identical_arms_are_refused_unless_an_aa_check_is_asked_for(capsys, a, b):
    line = refused(capsys, "compare", TINY, "--input", "1x3x8x8", "--a", a, "--b", b, "--blocks", "6",
                   "--per-block", "1", "--no-history")
    from torchperf_tui.engine.measurements.ab_arms import same_arms_refusal  # the app's sentence too

    assert line == "torchperf-tui: error: " + same_arms_refusal("--aa runs an A/A check of the noise on purpose")


def test_an_aa_check_runs_and_says_it_is_one(capsys):
    import json

    code, out, _ = run(capsys, "compare", TINY, "--input", "1x3x8x8", "--a", "", "--b", "", "--aa", "--blocks", "6",
                       "--per-block", "1", "--no-history", "--json")
    data = json.loads(out)
    assert code == 0 and data["notes"][0].startswith("A/A: both arms identical")
    assert data["verdict"] is not None


def test_a_symlinked_history_is_refused_where_the_option_enters_before_any_run(capsys, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    link = tmp_path / "history.jsonl"
    link.symlink_to(target)
    line = refused(capsys, "--history", str(link), "bench", TINY, "--input", "1x3x8x8", "--iters", "2")
    assert line.endswith(f"--history: will not use {link}: it is a symbolic link, not a regular file "
                         "(see --help)")
    assert target.read_text() == "mine\n"
    # a reader is refused in the same words: the option is the reader's as much as the writer's
    assert refused(capsys, "history", "--history", str(link)).endswith(
        f"--history: will not use {link}: it is a symbolic link, not a regular file (see --help)")
    assert "a directory" in refused(capsys, "--history", str(tmp_path), "history")


def test_history_dash_is_refused_not_a_file_named_dash(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (("--history", "-", "bench", TINY, "--input", "1x3x8x8", "--iters", "2"), ("history", "--history", "-")):
        assert refused(capsys, *args).endswith(
            "--history: '-' is not a file: the history is a file of run records, give its path (see --help)")
    assert list(tmp_path.iterdir()) == []


def test_export_output_dash_is_stdout_not_a_file_named_dash(capsys, tmp_path, monkeypatch):
    from tests.records import make_record
    from torchperf_tui.engine.records.history_file import HistoryFile

    history = tmp_path / "h.jsonl"
    HistoryFile(history).extend([make_record(), make_record()])
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "--history", str(history), "export", "--format", "csv", "--output", "-")
    assert code == 0 and len(out.strip().splitlines()) == 3  # header + two runs, on stdout
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cuda:", "cpu:0", "", "cuda:-1"])
def test_the_apps_device_is_checked_at_start_not_at_the_first_run(capsys, monkeypatch, device):
    from torchperf_tui import entry

    started = []
    monkeypatch.setattr(entry, "run_tui", lambda args: started.append(args) or 0)  # the app must not start
    line = refused(capsys, "--device", device)
    assert "unknown device" in line and "use auto, cpu, cuda or cuda:N" in line and not started


@pytest.mark.parametrize("device, kept", [("auto", "auto"), ("CPU", "cpu"), ("cuda", "cuda"), ("cuda:1", "cuda:1")])
def test_the_apps_device_accepts_what_the_commands_accept(capsys, monkeypatch, device, kept):
    from torchperf_tui import entry

    started = []
    monkeypatch.setattr(entry, "run_tui", lambda args: started.append(args.app_device) or 0)
    code, _, err = run(capsys, "--device", device)
    assert code == 0 and started == [kept], err


def test_checking_a_device_name_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys; from torchperf_tui.core import options; options.device_name('cuda:0'); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("command", [["flops"], ["bench", "--iters", "3", "--warmup", "0", "--no-history"]])
def test_a_custom_model_without_an_input_shape_is_said_to_run_at_an_assumed_one(capsys, command):
    """tiny_cnn declares no input_shape: the CLI must say the shape it ran is assumed, not run 3x224x224 silently;
    with --input given there is nothing to say."""
    code, out, err = run(capsys, command[0], TINY, *command[1:])
    assert code == 0, err
    assert "does not say its input shape" in err and "assumed 3x224x224" in err
    code, out, err = run(capsys, command[0], TINY, "--input", "1x3x8x8", *command[1:])
    assert code == 0 and "assumed" not in err, err
