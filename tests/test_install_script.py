"""scripts/install.sh, the README's Run step: the CUDA build of torch where an NVIDIA GPU is present, the CPU
build where none is, and a plain PyPI install (said) where PyTorch's CPU index cannot be reached. Driven in its
--dry-run mode with a fake nvidia-smi first on PATH: nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install.sh"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")


def dry_run(tmp_path, nvidia_smi: str | None, *, device_node: bool = False, index: str | None = None,
            args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The script's --dry-run with `nvidia-smi` replaced by a fake printing `nvidia_smi` (None: one that fails,
    as it does on a box whose driver is missing), the GPU device node present or not, and the CPU index at
    `index` (default: a local file that exists, so the test needs no network)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    if nvidia_smi is None:
        fake.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the "
                        "NVIDIA driver.'\nexit 9\n")
    else:
        fake.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && printf '%s\\n' '{nvidia_smi}'\n")
    fake.chmod(0o755)
    node = tmp_path / "nvidia0"
    if device_node:
        node.write_text("")
    if index is None:
        (tmp_path / "index.html").write_text("<html></html>")
        index = (tmp_path / "index.html").as_uri()
    # PYTHON is the script's own variable (the interpreter that makes the venv): one set around the suite (the
    # stress script's) must not change what the script is expected to print.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHON"},
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "TORCHPERF_NVIDIA_DEVICE": str(node), "TORCHPERF_TORCH_CPU_INDEX": index, "VENV": ".venv"}
    return subprocess.run(["sh", str(SCRIPT), "--dry-run", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def compiled(target: str) -> str:
    """The last command: the project's modules (and with the test extras the tests) compiled once, so that no process
    compiles them again where PYTHONDONTWRITEBYTECODE is set."""
    return "env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m compileall -q tui" + (" tests" if target != "." else "")


def commands(done: subprocess.CompletedProcess) -> list[str]:
    return [line[2:] for line in done.stdout.splitlines() if line.startswith("+ ")]


def test_a_box_whose_nvidia_smi_lists_a_gpu_gets_the_cuda_build_from_pypi(tmp_path):
    done = dry_run(tmp_path, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)")
    assert done.returncode == 0, done.stderr
    assert "an NVIDIA GPU is present" in done.stdout
    assert commands(done) == ["python3 -m venv .venv", ".venv/bin/pip install -e .", compiled(".")]


def test_a_box_with_the_gpu_device_node_gets_the_cuda_build_even_if_nvidia_smi_fails(tmp_path):
    done = dry_run(tmp_path, None, device_node=True)
    assert done.returncode == 0 and commands(done)[-2:] == [".venv/bin/pip install -e .", compiled(".")]


def declared_torch() -> list[str]:
    """torch's and torchvision's requirements as pyproject.toml declares them, shell-quoted as the script prints
    them: "'torch>=2.4'"."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    found = {name: [r for r in declared if r.startswith(name) and not r[len(name):len(name) + 1].isalnum()]
             for name in ("torch", "torchvision")}
    assert all(len(reqs) == 1 for reqs in found.values()), found
    return [f"'{reqs[0]}'" for reqs in found.values()]


def test_a_box_without_a_gpu_gets_torch_from_the_cpu_index_alone_then_the_project_from_pypi(tmp_path):
    """PyTorch's documented way: torch and torchvision from the CPU index with --index-url (within the project's
    ranges), then the project, which keeps them. With --extra-index-url pip took the highest version of both
    indexes: a PyPI release ahead of the CPU index brought back the CUDA build."""
    for smi, args, target in ((None, (), "."), ("No devices were found", ("--test",), "'.[test]'")):
        done = dry_run(tmp_path, smi, args=args)
        assert done.returncode == 0, done.stderr
        index = (tmp_path / "index.html").as_uri()
        assert "no NVIDIA GPU: torch's CPU-only build" in done.stdout
        assert commands(done) == ["python3 -m venv .venv",
                                  f".venv/bin/pip install {' '.join(declared_torch())} --index-url {index}",
                                  f".venv/bin/pip install -e {target}", compiled(target)]
        assert "--extra-index-url" not in done.stdout


def test_an_unreachable_cpu_index_falls_back_to_pypi_and_says_so(tmp_path):
    done = dry_run(tmp_path, None, index=(tmp_path / "no-such-index").as_uri(), args=("--test",))
    assert done.returncode == 0
    assert "cannot be reached: torch comes from PyPI alone" in done.stderr
    # ... and how to get the CPU build all the same: a mirror of the index, named by the variable the script reads
    assert "set TORCHPERF_TORCH_CPU_INDEX to its URL" in done.stderr
    assert commands(done) == ["python3 -m venv .venv", ".venv/bin/pip install -e '.[test]'", compiled("'.[test]'")]


def test_ci_runs_the_readmes_test_command_exactly():
    """The README's Test command is the script (on a CPU box the CPU build, not the CUDA wheels' 5.6 GB), and
    CI (.ci/run, on a clean clone) runs that same line."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Test\n", 1)[1].split("\n## ", 1)[0]
    command = section.split("```bash\n", 1)[1].split("\n```", 1)[0].strip()
    assert command == "sh scripts/install.sh --test && .venv/bin/python -m pytest"
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == command


def test_help_is_the_scripts_header_whole():
    done = subprocess.run(["sh", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("# Install torchperf-tui")
    assert done.stdout.rstrip().endswith("$PYTHON (default python3) makes the environment.")


def test_an_unknown_option_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(["sh", str(SCRIPT), "--gpu"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == "install.sh: unknown option --gpu (see --help)"
    assert done.stdout == ""


def test_the_default_cpu_index_is_pytorchs():
    assert f"CPU_INDEX=${{TORCHPERF_TORCH_CPU_INDEX:-{CPU_INDEX}}}" in SCRIPT.read_text()
