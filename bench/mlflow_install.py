"""Which MLflow package the `mlflow` extra installs: `mlflow` against `mlflow-skinny` with what its sqlite store
needs (SQLAlchemy, Alembic), each into a fresh virtual environment with pip's cache off (as CI installs), timed,
with the environment's size, the packages it added beyond this environment's (torchperf-tui's own dependencies),
and a check that each writes a run to a sqlite store and reads it back.

    .venv/bin/python bench/mlflow_install.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import distributions
from pathlib import Path

CANDIDATES = {"mlflow": ["mlflow"], "mlflow-skinny + sqlalchemy + alembic": ["mlflow-skinny", "sqlalchemy", "alembic"]}
CHECK = """
import sys, tempfile, os
from mlflow import MlflowClient
folder = tempfile.mkdtemp()
client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(folder, "m.db"))
eid = client.create_experiment("x", artifact_location="file://" + os.path.join(folder, "art"))
run = client.create_run(eid)
client.log_metric(run.info.run_id, "p50_ms", 1.5)
client.log_text(run.info.run_id, "[1.5]", "samples.json")
assert client.get_run(run.info.run_id).data.metrics == {"p50_ms": 1.5}
print("sqlite store: ok;", "torch imported" if "torch" in sys.modules else "no torch imported")
"""


def _names(python: str) -> set[str]:
    out = subprocess.run([python, "-c", "from importlib.metadata import distributions\n"
                          "print('\\n'.join(d.metadata['Name'] for d in distributions()))"],
                         capture_output=True, text=True, check=True).stdout
    return {_norm(n) for n in out.split()}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def measure(name: str, packages: list[str], root: Path, ours: set[str]) -> str:
    venv = root / name.split()[0]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    before = _names(python)
    base = _size_mb(venv)
    start = time.perf_counter()
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir", *packages], check=True)
    seconds = time.perf_counter() - start
    added = _names(python) - before
    beyond = sorted(added - ours)
    check = subprocess.run([python, "-c", CHECK], capture_output=True, text=True)
    said = check.stdout.strip() or f"check failed: {check.stderr.strip().splitlines()[-1:]}"
    return (f"{name}:\n  install {seconds:.1f} s, {_size_mb(venv) - base:.0f} MB, {len(added)} packages "
            f"({len(beyond)} beyond torchperf-tui's own dependencies)\n  {said}\n"
            f"  beyond ours: {' '.join(beyond)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", metavar="DIR", help="make the environments here and keep them")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="mlflow-install-"))
    root.mkdir(parents=True, exist_ok=True)
    ours = {_norm(d.metadata["Name"]) for d in distributions()}
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, pip cache off, fresh venvs in {root}")
    try:
        for name, packages in CANDIDATES.items():
            print(measure(name, packages, root, ours), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
