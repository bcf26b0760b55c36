"""torch.compile's warm start: a second process compiles the model a run compiled, at the same input, under the same
flags, step and thread count, from the cache folder the run's cold start filled (compile_cache.py), and says what its
first call took, by phase (compile_cost.CompilePhases). It does nothing else: no timed iterations.

It starts as the measurement process does (a new interpreter, `python -P -m`, this process's import path, stdin from
/dev/null), writes its output, and the model's prints, to a log in the run's folder, runs in a session of its own
(stopping it stops the compile workers it started) and ends with this process (Linux: PR_SET_PDEATHSIG). The run
waits for it checking its cancel flag every POLL_S (in the measurement process each check is a sign of life for the
client's deadline: measure/deadlines.py), for at most warm_limit_s: cancelled, or past that, it is stopped and the
run says the warm start was not measured, and why; so does a second process that failed, in its own last line.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

from torchperf_tui.core.errors import TorchperfError, user_message
from torchperf_tui.core.output_files import write_text
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.compile_cost import CompiledModel, CompilePhases, compile_model
from torchperf_tui.engine.measurements.flags import applied_flags
from torchperf_tui.engine.measurements.train_step import grad_context
from torchperf_tui.engine.workloads.workload import prepare_workload

WARM_BASE_S = 180.0  # the second process's own start: an interpreter, torch's import, its compiler readied, the build
WARM_PER_COLD_S = 2.0  # and twice the cold start: a warm start that takes longer has lost its point
POLL_S = 0.5
NOT_RUN = "not measured: the run was cancelled"
STOPPED = "not measured: cancelled while its second process ran"


def warm_limit_s(cold_s: float) -> float:
    """How long the second process may take: WARM_BASE_S + WARM_PER_COLD_S x the cold start."""
    return WARM_BASE_S + WARM_PER_COLD_S * cold_s


@dataclass(frozen=True)
class WarmRequest:
    """What the second process compiles, and where: the run's spec, the variables that point torch's caches at the
    run's folder, the folder its own files go to, the thread count the cold start ran with, its time limit."""

    cfg: BenchConfig
    cache_environ: dict
    folder: str
    threads: int | None
    limit_s: float


ShouldCancel = Callable[[], bool]
# How a run measures its warm start: compile_warm, or a stand-in (tests).
WarmStart = Callable[[WarmRequest, ShouldCancel], "tuple[CompilePhases | None, str]"]


def warm_start_of(cfg: BenchConfig, cache_environ: dict, folder: str | None, compiling: CompiledModel,
                  threads: int | None, cancelled: bool, warm_start: WarmStart | None,
                  should_cancel: ShouldCancel | None) -> tuple[CompilePhases | None, str]:
    """The run's warm start, or why there is none ('' for a run that did not compile)."""
    if not compiling.compiled or folder is None:
        return None, ""
    if cancelled:
        return None, NOT_RUN
    if warm_start is None:
        return None, "not measured (asked not to)"
    request = WarmRequest(cfg=cfg, cache_environ=dict(cache_environ), folder=folder, threads=threads,
                          limit_s=warm_limit_s(compiling.compile_s))
    return warm_start(request, should_cancel or (lambda: False))


def compile_warm(request: WarmRequest, should_cancel: ShouldCancel) -> tuple[CompilePhases | None, str]:
    """Run the second process and wait for it: (its first call's phases, '') or (None, why not)."""
    request_path = os.path.join(request.folder, "warm-request.pickle")
    out_path = os.path.join(request.folder, "warm.json")
    log_path = os.path.join(request.folder, "warm.log")
    with open(request_path, "wb") as handle:
        pickle.dump(request, handle)
    env = dict(os.environ, **request.cache_environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []  # as measure/spawn.py: no source tree shadows torch
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, *safe_path, "-m", __name__, request_path, out_path,
                                    str(os.getpid())], stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                   close_fds=True, start_new_session=True)
    started = time.monotonic()
    while True:
        try:
            code = process.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            pass
        if should_cancel():
            _stop(process)
            return None, STOPPED
        if time.monotonic() - started > request.limit_s:
            _stop(process)
            return None, (f"skipped: the second process took over {request.limit_s:.0f} s ({WARM_BASE_S:.0f} s + "
                          f"{WARM_PER_COLD_S:g} x the cold start)")
    return _answer(out_path, log_path, code)


def _stop(process: subprocess.Popen) -> None:
    """Stop the second process and whatever it started (its session's process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def _answer(out_path: str, log_path: str, code: int) -> tuple[CompilePhases | None, str]:
    try:
        with open(out_path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("phases"), dict):
        return CompilePhases.from_dict(data["phases"]), ""
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return None, f"failed in the second process: {data['error']}"
    return None, f"failed: the second process ended with code {code}{_last_line(log_path)}"


def _last_line(log_path: str) -> str:
    try:
        with open(log_path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(log_path) - 4096))
            lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f" ({lines[-1][:300]})" if lines else ""


# -- the second process --------------------------------------------------------------------------------------------

def first_call(request: WarmRequest) -> CompilePhases:
    """Build the run's model and input as the run did and compile it as it did (compile_model): its phases."""
    cfg = request.cfg
    plan = cfg.prepare()
    work = prepare_workload(cfg.model, plan.inputs, plan.device, plan.dtype, cfg.channels_last, seed=cfg.seed,
                            model_args=cfg.model_args, quant=cfg.quant, attn=cfg.attn)
    flags = cfg.flags if request.threads is None else cfg.flags.replace(num_threads=request.threads)
    with applied_flags(flags), grad_context(plan.step):
        compiling = compile_model(work.model, work.x, cfg.compile, plan.device)
    if compiling.error is not None:
        raise TorchperfError(compiling.error)
    return compiling.phases


def _die_with(parent: int) -> None:
    """Linux: end when the process that started this one ends (even by SIGKILL), and now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def main(argv: list[str]) -> int:
    """`python -m torchperf_tui.engine.measurements.warm_compile REQUEST OUT PARENT_PID`: the phases of the warm
    start, or the error that stopped it in one line, as JSON in OUT."""
    request_path, out_path, parent = argv[0], argv[1], int(argv[2])
    _die_with(parent)
    with open(request_path, "rb") as handle:
        request = pickle.load(handle)  # written by the run that started this process, in its own folder
    try:
        data = {"phases": asdict(first_call(request))}
    except Exception as exc:  # noqa: BLE001 - any failure is the warm start's one line, never a crash of the run
        data = {"error": user_message(exc)}
    write_text(out_path, json.dumps(data))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # a model's threads must not hold the process
