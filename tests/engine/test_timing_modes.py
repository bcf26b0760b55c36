"""Timing modes side by side (bench --modes): sync, pipelined and graph measured in one run, in interleaved
rounds, each mode's samples apart, the gaps said in words; graph and the cold L2 are CUDA-only."""

from __future__ import annotations

import json
import time

import pytest
import torch
from torch import nn

from tests.test_cli import run
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.core.stats import compute_stats
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing_modes import ModeResult, ModesResult, findings, parse_modes, run_modes

TINY = "tests.tinymodels:tiny_cnn"
SLEEPY = "tests.engine.test_timing_modes:sleepy"
SLEEP_S = 0.002


class Sleepy(nn.Module):
    """A forward pass that takes at least 2 ms of wall time whatever the box."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(SLEEP_S)
        return self.fc(x)


def sleepy() -> nn.Module:
    return Sleepy()


def test_sync_and_pipelined_run_on_the_cpu_and_graph_says_it_is_gpu_only():
    cfg = BenchConfig(model=SLEEPY, input_shape=(2, 4), device="cpu", warmup=1, iters=6)
    result = run_modes(cfg, parse_modes("graph,sync,pipelined"), per_block=4, rounds=2)
    sync, pipelined, graph = (result.mode(name) for name in ("sync", "pipelined", "graph"))
    assert len(sync.samples_ms) == 6 and sync.stats.n == 6
    assert len(pipelined.samples_ms) == 3 * 2  # three blocks a round at least
    # A pipelined sample is a block's time per iteration, not the block's: about one sleep, not four.
    assert all(SLEEP_S * 1e3 <= ms < 4 * SLEEP_S * 1e3 * 2 for ms in pipelined.samples_ms)
    assert all(ms >= SLEEP_S * 1e3 for ms in sync.samples_ms)
    assert graph.samples_ms == [] and graph.stats is None and "GPU-only" in graph.unavailable
    assert result.first_iter_ms is not None and not result.cancelled
    assert any("sync and pipelined" in line or "pipelin" in line for line in result.findings)
    json.dumps(result.to_dict(), allow_nan=False)


def test_the_modes_alternate_round_by_round_and_each_takes_its_share():
    seen: list[str] = []
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=9)
    run_modes(cfg, ("sync", "pipelined"), per_block=2, rounds=3,
              on_progress=lambda mode, done, total: seen.append(mode))
    # 3 samples of each a round (sync: 9 over 3 rounds; pipelined: 3 blocks a round), the order rotating
    rounds = [["sync"] * 3 + ["pipelined"] * 3, ["pipelined"] * 3 + ["sync"] * 3, ["sync"] * 3 + ["pipelined"] * 3]
    assert seen == [mode for round_ in rounds for mode in round_]


def test_a_training_step_has_modes_too():
    cfg = BenchConfig(model=TINY, input_shape=(2, 3, 8, 8), device="cpu", warmup=1, iters=3, step="train")
    result = run_modes(cfg, ("sync", "pipelined"), per_block=2, rounds=1)
    assert result.step == "train (sgd)" and result.mode("sync").stats.n == 3 and result.mode("pipelined").stats.n == 3


def test_a_cancelled_run_keeps_what_it_measured():
    calls = []
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=20)
    result = run_modes(cfg, ("sync", "pipelined"), rounds=2,
                       on_progress=lambda *a: calls.append(a), should_cancel=lambda: len(calls) >= 4)
    assert result.cancelled and len(result.mode("sync").samples_ms) == 4 and result.mode("pipelined").stats is None


def _result(device: str, **medians: float) -> ModesResult:
    modes = [ModeResult(name, [ms] * 5, compute_stats([ms] * 5, batch=1)) for name, ms in medians.items()]
    return ModesResult(model="m", device=device, input_shape=(1, 3, 8, 8), dtype="float32", step="infer",
                       flags=Flags(), modes=modes, per_block=10, rounds=3)


def test_the_gaps_are_said_in_words():
    launch_bound = findings(_result("cuda:0", sync=1.7, pipelined=1.4, graph=0.8))
    assert launch_bound[0].startswith("launch-bound: launch overhead ≈ 900 µs of 1.70 ms (sync − graph, 53 %): the GPU "
                                      "waits for Python")
    assert launch_bound[1].startswith("pipelining hides 300 µs of 1.70 ms (sync − pipelined, 18 %)")
    gpu_bound = findings(_result("cuda:0", sync=20.0, pipelined=19.9, graph=19.8))
    assert gpu_bound[0].startswith("launch overhead small") and "agree within 3 %" in gpu_bound[1]
    assert gpu_bound[1].endswith("the GPU's work sets the pace, so nothing is left to hide")
    # Seen on an H100 (resnet50, batch 1): graph 0.91 ms under a sync 4.41 ms that pipelining did not beat; the
    # reason is the launches, not the GPU.
    cpu_paced = findings(_result("cuda:0", sync=4.41, pipelined=4.40, graph=0.91))
    assert cpu_paced[0].startswith("launch-bound") and cpu_paced[1].endswith("cannot get ahead of themselves")
    # ... and at batch 64, 4 % of launch overhead is a modest share, not a launch-bound model
    modest = findings(_result("cuda:0", sync=11.36, pipelined=11.30, graph=10.94))
    assert modest[0] == ("launch overhead ≈ 420 µs of 11.36 ms (sync − graph, 4 %): a modest share; a CUDA graph "
                         "would save about that")
    cpu = findings(_result("cpu", sync=5.0, pipelined=5.05))
    assert cpu == ["sync and pipelined agree within 3 % (5.00 ms vs 5.05 ms): on the CPU an iteration is "
                   "synchronous, so the two measure the same thing"]


def test_bad_requests_are_one_line_errors():
    with pytest.raises(TorchperfError, match="unknown timing mode 'fast'.*choose from sync, pipelined, graph"):
        parse_modes("sync,fast")
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", iters=2)
    with pytest.raises(TorchperfError, match="needs --device cuda"):
        run_modes(cfg, ("sync",), cold_l2=True)
    with pytest.raises(TorchperfError, match="fixed input shape"):
        run_modes(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", shapes="cycle:2"), ("sync",))


def test_graph_alone_where_it_cannot_run_is_refused_not_an_empty_result():
    for cfg in (BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", iters=2),
                BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", iters=2, step="train")):
        with pytest.raises(TorchperfError, match="graph mode") as caught:
            run_modes(cfg, ("graph",))
        assert "sync" in str(caught.value)  # it says what can be measured instead


def test_the_cli_prints_the_modes_and_their_gaps(capsys):
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--modes", "sync,pipelined,graph", "--iters", "6",
                       "--warmup", "1", "--per-block", "2")
    assert code == 0 and "timing modes in 3 interleaved rounds" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip().split(" ")[0] in
             ("sync", "pipelined", "graph")}
    assert set(lines) == {"sync", "pipelined", "graph"} and "n/a: CUDA graphs are GPU-only" in lines["graph"]
    assert "- sync and pipelined" in out or "- pipelin" in out
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--modes", "sync", "--iters", "3", "--json")
    data = json.loads(out)
    assert code == 0 and [m["mode"] for m in data["modes"]] == ["sync"] and "samples_ms" not in data["modes"][0]


@pytest.mark.parametrize("argv, message", [
    (["--modes", "warp"], "unknown timing mode 'warp'"),
    (["--modes", "sync", "--cold-l2"], "needs --device cuda"),
    (["--cold-l2"], "--cold-l2 goes with --modes"),
    (["--modes", "graph"], "graph mode needs CUDA"),  # once exit 0 with nothing measured
])
def test_the_cli_refuses_in_one_line(capsys, argv, message):
    code, out, err = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--iters", "2", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")
def test_gpu_graph_mode_captures_and_the_cold_l2_buffer_is_twice_the_l2():
    cfg = BenchConfig(model=TINY, input_shape=(8, 3, 32, 32), device="cuda", warmup=3, iters=12)
    result = run_modes(cfg, cold_l2=True, per_block=4)
    assert all(m.unavailable is None and m.stats is not None for m in result.modes)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert result.flush_bytes == 2 * l2 and any("launch overhead" in line for line in result.findings)
    train = run_modes(BenchConfig(model=TINY, input_shape=(8, 3, 32, 32), device="cuda", iters=4, step="train"))
    assert "training step is not captured" in train.mode("graph").unavailable and train.mode("sync").stats.n == 4


def test_a_model_that_rejects_its_input_is_one_line_naming_the_input():
    from torchperf_tui.core.errors import ShapeError

    with pytest.raises(ShapeError, match="rejected input 1x3x24x24.*24 is not supported"):
        run_modes(BenchConfig(model="tests.tinymodels:picky", input_shape=(1, 3, 24, 24), device="cpu", iters=2),
                  ("sync",))
