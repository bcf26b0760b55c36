"""FLOP counting: this engine (meta device) against fvcore, thop and ptflops.

For each model every tool runs in its own fresh process (so peak memory is its own): one warm-up,
then the median of --repeats timed runs of "model name in, count out", which for a peer means
building the model with real (random) weights and running its counter on a real CPU forward, and for
us `analyse_complexity(name, shape)` with its per-layer table. GMACs are compared with torchvision's
published `meta["_ops"]`. Peers are not dependencies: `.venv/bin/pip install fvcore thop ptflops`.
A peer that is missing or fails on a model is reported and skipped.

    PYTHONPATH=tui .venv/bin/python bench/flops_speed.py [--models resnet50,vit_b_16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import textwrap

from torchperf_tui.core.formatting import format_shape

TOOLS = ("torchperf", "fvcore", "thop", "ptflops")

# Runs inside the child process: prints one JSON line. Each tool returns MACs (fvcore's "flops" are
# fused multiply-adds, i.e. MACs; thop and ptflops report MACs by name).
CHILD = textwrap.dedent('''
    import json, resource, statistics, sys, time, warnings
    warnings.filterwarnings("ignore")
    tool, name, shape, repeats = sys.argv[1], sys.argv[2], tuple(json.loads(sys.argv[3])), int(sys.argv[4])
    import torch, torchvision

    def build():
        return torchvision.models.get_model(name, weights=None).eval()

    if tool == "torchperf":
        from torchperf_tui.engine.workloads.complexity import analyse_complexity
        def count():
            return analyse_complexity(name, shape).macs
    elif tool == "fvcore":
        from fvcore.nn import FlopCountAnalysis
        def count():
            analysis = FlopCountAnalysis(build(), torch.randn(shape))
            analysis.unsupported_ops_warnings(False)
            analysis.uncalled_modules_warnings(False)
            return analysis.total()
    elif tool == "thop":
        from thop import profile
        def count():
            macs, _params = profile(build(), inputs=(torch.randn(shape),), verbose=False)
            return macs
    elif tool == "ptflops":
        from ptflops import get_model_complexity_info
        def count():
            macs, _params = get_model_complexity_info(build(), tuple(shape[1:]), as_strings=False,
                                                      print_per_layer_stat=False, verbose=False)
            return macs
    with torch.no_grad():
        macs = count()  # warm-up: first-call costs (lazy imports, kernel selection) are not the tool's
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            count()
            times.append(time.perf_counter() - start)
    print(json.dumps({"macs": float(macs), "seconds": statistics.median(times),
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
''')


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} logical cores, {platform.system()} {platform.release()}"


def versions() -> str:
    from importlib import metadata

    import torch
    import torchvision

    parts = [f"torch {torch.__version__}", f"torchvision {torchvision.__version__}",
             f"python {platform.python_version()}"]
    for peer in ("fvcore", "thop", "ptflops"):
        dist = {"thop": "thop"}.get(peer, peer)
        try:
            parts.append(f"{peer} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{peer} not installed")
    return ", ".join(parts)


def published_gmacs(name: str) -> tuple[float, tuple[int, ...]]:
    """torchvision's _ops for the model's DEFAULT weights, and the crop it was measured at."""
    import torchvision.models as tvm

    weights = tvm.get_model_weights(name).DEFAULT
    crop = weights.transforms.keywords["crop_size"]
    return float(weights.meta["_ops"]), (1, 3, crop, crop)


def run_tool(tool: str, name: str, shape: tuple[int, ...], repeats: int) -> dict:
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(here, "..", "tui"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", CHILD, tool, name, json.dumps(shape), str(repeats)],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return {"error": lines[-1] if lines else f"exit status {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet50,vit_b_16")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print("FLOP counting speed: torchperf (meta device) vs fvcore, thop, ptflops")
    print(f"machine: {machine()}")
    print(f"versions: {versions()}")
    print(f"method: fresh process per tool and model; median of {args.repeats} runs after one warm-up;")
    print("        time = model name in -> count out (peers build real weights and run a CPU forward).")
    print()
    header = f"{'model':10s} {'tool':10s} {'GMACs':>9s} {'vs _ops':>8s} {'time s':>8s} {'peer/ours':>9s} {'peak RSS MB':>11s}"
    for name in args.models.split(","):
        ops, shape = published_gmacs(name)
        print(f"{name} at {format_shape(shape)}: torchvision _ops = {ops:.3f} GMACs")
        print(header)
        ours = None
        for tool in TOOLS:
            result = run_tool(tool, name, shape, args.repeats)
            if "error" in result:
                print(f"{name:10s} {tool:10s} failed: {result['error'][:150]}")
                continue
            gmacs = result["macs"] / 1e9
            seconds = result["seconds"]
            if tool == "torchperf":
                ours = seconds
            ratio = f"{seconds / ours:8.1f}x" if ours else "-"
            print(f"{name:10s} {tool:10s} {gmacs:9.3f} {100 * (gmacs / ops - 1):+7.1f}% {seconds:8.3f} "
                  f"{ratio:>9s} {result['peak_rss_bytes'] / 2**20:11.0f}")
        print()
    print("peer/ours > 1 means the peer is slower. Peak RSS includes the ~0.3-0.5 GB of importing torch.")


if __name__ == "__main__":
    main()
