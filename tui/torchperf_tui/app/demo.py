"""A hands-free demo (`torchperf-tui --demo [MODEL]`): the cuDNN trade-offs played as a story, each step
announced in a banner and paced for an audience. Any key takes over. A transformers model (`--demo hf:llama`) plays
the attention story instead (app/demo_attention.py).

The story, on a GPU: cudnn.benchmark off vs on at a fixed shape (interleaved A/B with a verdict), the same
with random shapes (benchmark re-tunes for every new one), cudnn.deterministic on (its cost, then the
determinism check's bit-equality), the same for a training step (forward, loss, backward, SGD: where
non-determinism lives, in the gradients), int8 weight-only against float32 (its verdict, B's drift and the
prediction; skipped and said where torchao is not installed), and a memory release on the Memory tab. On a CPU box each GPU-only flag
is replaced by its CPU analogue (oneDNN, deterministic algorithms) and the banner says so.

The director drives the panes only through what their keys call (the A/B, the determinism check, the
release), so the demo shows exactly what a user would get by pressing the keys.
"""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import dataclass
from typing import Callable

from torchperf_tui.app.demo_attention import AttentionStory, STEPS, tells_attention
from torchperf_tui.core.errors import user_message

DEFAULT_MODEL = "resnet18"


@dataclass(frozen=True)
class DemoStep:
    title: str  # the banner
    note: str  # one line under it: what to look at


# The banners (title, note) of the first three steps and the training step: on a GPU, and on a CPU box with each
# GPU-only flag replaced by its CPU analogue.
GPU_STEPS = (
    ("cudnn.benchmark off vs on, fixed input shape",
     "A/B interleaved in blocks: the verdict says whether the difference is real"),
    ("cudnn.benchmark off vs on, a new random input size each iteration",
     "it re-tunes for every new shape: watch the win shrink or turn into a loss"),
    ("cudnn.deterministic on: its cost, and bit-equality",
     "A/B of its speed, then the same input twice: bitwise equal or not"),
    ("a training step: cudnn.deterministic off vs on",
     "forward, loss, backward, SGD: its cost, then gradients and updated weights bit for bit"),
)
CPU_STEPS = (
    ("oneDNN on vs off, fixed shape (cudnn.benchmark is GPU-only; this is its CPU analogue)",
     "A/B interleaved in blocks: the verdict says whether the difference is real"),
    ("oneDNN on vs off, a new random input size each iteration",
     "oneDNN builds primitives per new shape, as cudnn.benchmark re-tunes on a GPU"),
    ("deterministic algorithms on: cost and bit-equality (cudnn.deterministic is GPU-only)",
     "A/B of the speed, then the same input twice: bitwise equal or not"),
    ("a training step: deterministic algorithms off vs on",
     "forward, loss, backward, SGD: its cost, then gradients and updated weights bit for bit"),
)
CNN_KEYS = "r runs, a compares the flags before and after a flip, k shows the kernels, ? for help"
ATTENTION_KEYS = ("r runs, a compares the flags before and after a flip, k shows the kernels, W sweeps both, "
                  "g generates, ? for help")
RELEASE_STEP = ("release cached memory and watch the curve drop", "the chart marks the instant and what was freed")
# Low precision: the model's Linear layers in int8 weights (torchao) against float32, where torchao is installed.
QUANT_STEP = ("int8 weight-only (torchao) against float32: speed, drift, prediction",
              "Compare: the verdict, B's SQNR against A, and the ceilings' prediction beside the measured ratio")
NO_QUANT_STEP = ("int8 weight-only: skipped, torchao is not installed",
                 "pip install 'torchperf-tui[quant]' to see a quantized model's speed and drift")
# On a GPU that runs float8 matmuls (compute capability 8.9+): both arms in bfloat16, B's Linear layers in float8.
FP8_STEP = ("float8 (torchao, rowwise) against bfloat16: speed, drift, prediction",
            "Compare: the verdict, B's SQNR against A, and the float8 ceiling's prediction beside the measured ratio")
# The arms of the low-precision step: (A's run options, B's), as the selection holds them.
QUANT_ARMS = ({}, {"quant": "int8wo"})
FP8_ARMS = ({"dtype": "bfloat16"}, {"dtype": "bfloat16", "quant": "fp8"})


def runs_float8(report, device: str) -> bool:
    """Whether the GPU runs go to (`device`: 'auto', 'cuda', 'cuda:N') runs float8 matmuls: its compute capability,
    from the device report (the UI's process imports no torch), 8.9 or newer."""
    index = int(device.split(":", 1)[1]) if device.startswith("cuda:") and device[5:].isdigit() else 0
    gpus = getattr(report, "gpus", None) or []
    if index >= len(gpus):
        return False
    try:
        major, minor = (int(part) for part in str(gpus[index].compute_capability).split(".")[:2])
    except ValueError:  # not available: NA, or a name it could not read
        return False
    return (major, minor) >= (8, 9)


def quant_installed() -> bool:
    """Whether torchao can be imported by the measurement process (looked up, not imported: this is the UI's)."""
    return importlib.util.find_spec("torchao") is not None


def story(on_gpu: bool, fp8: bool = False) -> list[DemoStep]:
    """The CNN story's banners, in order: the flags, the training step, low precision (float8 against bfloat16 where
    `fp8`: the GPU runs it), then the memory release."""
    quant = (FP8_STEP if fp8 else QUANT_STEP) if quant_installed() else NO_QUANT_STEP
    return [DemoStep(title, note) for title, note in (*(GPU_STEPS if on_gpu else CPU_STEPS), quant, RELEASE_STEP)]


class DemoDirector:
    """Plays the story on a TorchperfApp; `stop()` (any key) hands the keys back at once."""

    def __init__(self, app, pace: float = 3.0) -> None:
        self.app = app
        self.pace = pace  # seconds a banner stays before its step acts, and after it finishes
        self.running = False
        self.step = 0
        self._worker = None

    def start(self) -> None:
        self.running = True
        self._worker = self.app.run_worker(self._play(), group="demo", exclusive=True, exit_on_error=False)

    def stop(self, reason: str = "demo stopped: the keys are yours") -> None:
        if not self.running:
            return
        self.running = False
        if self._worker is not None:
            self._worker.cancel()
        self.app.main.show_banner(reason, "")

    async def _wait(self, predicate: Callable[[], bool], timeout: float = 600.0) -> None:
        waited = 0.0
        while not predicate():
            await asyncio.sleep(0.1)
            waited += 0.1
            if waited > timeout:
                raise TimeoutError("a demo step took too long")

    async def _announce(self, index: int, step: DemoStep, total: int) -> None:
        self.step = index
        self.app.main.show_banner(f"demo {index}/{total} · {step.title}", f"{step.note} · any key takes over")
        await asyncio.sleep(self.pace)

    async def _ab(self, flags_a, flags_b, b_options: dict | None = None, a_options: dict | None = None) -> None:
        compare, runs = self.app.pane("compare"), self.app.session.runs
        compare.start_ab(flags_a, flags_b, b_options, a_options)
        if compare.ab_runs is None:
            raise RuntimeError("the A/B comparison did not start")
        arm_b = compare.ab_runs[1]
        await self._wait(lambda: runs.get(arm_b) is None or runs.get(arm_b).finished)
        await asyncio.sleep(self.pace)

    def _set_run_option(self, name: str, value: str) -> None:
        """Change a run option as the selector would show it (without starting a run)."""
        self.app.pane("options").set_value(name, value)

    async def _check_determinism(self, strict_flags) -> None:
        """The determinism check under `strict_flags` (of the run options' step), on the Timing tab."""
        flags, timing = self.app.pane("flags"), self.app.pane("timing")
        base = flags.flags
        flags.set_values(strict_flags)
        timing.last_determinism = None
        timing.check_determinism()
        self.app.main.show_tab("timing")
        await self._wait(lambda: timing.last_determinism is not None, timeout=180)
        await asyncio.sleep(self.pace)
        flags.set_values(base)

    async def _play(self) -> None:
        try:
            await self._story()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a step that cannot go on: say so, hand the keys back

            self.stop(f"demo stopped: {user_message(exc)}")

    async def _story(self) -> None:
        app = self.app
        picker, flags = app.pane("picker"), app.pane("flags")
        await self._wait(lambda: picker.model is not None and picker.complexity is not None
                         and flags.flags is not None and app.session.report is not None)
        on_gpu = app.session.device_kind() == "cuda"
        if tells_attention(picker.model):  # a transformers model: SDPA's math against flash

            async def count(index: int, steps: list) -> None:
                await self._announce(index + 1, DemoStep(*steps[index]), len(steps) + 1)

            await AttentionStory(self, on_gpu).play(count)
            total, keys = len(STEPS) + 1, ATTENTION_KEYS
        else:
            total, keys = await self._cnn_story(on_gpu), CNN_KEYS
        self.running = False
        app.main.show_banner(f"demo {total}/{total} · that's the story", keys)

    async def _cnn_story(self, on_gpu: bool) -> int:
        """The cuDNN trade-offs (or their CPU analogues); the number of banners it shows, the last included."""
        app = self.app
        flags, memory = app.pane("flags"), app.pane("memory")
        fp8 = on_gpu and runs_float8(app.session.report, app.session.device)
        steps = story(on_gpu, fp8)
        total = len(steps) + 1
        base = flags.flags
        if on_gpu:
            switch, switched = "cudnn_benchmark", True
            strict = {"cudnn_deterministic": True}
        else:
            switch, switched = "mkldnn_enabled", False
            strict = {"deterministic_algorithms": True}
        flipped = base.replace(**{switch: switched})

        await self._announce(1, steps[0], total)
        self._set_run_option("shapes", "fixed")
        await self._ab(base, flipped)

        await self._announce(2, steps[1], total)
        self._set_run_option("shapes", "random")
        await self._ab(base, flipped)
        self._set_run_option("shapes", "fixed")

        await self._announce(3, steps[2], total)
        strict_flags = base.replace(**strict)
        await self._ab(base, strict_flags)
        await self._check_determinism(strict_flags)

        await self._announce(4, steps[3], total)
        self._set_run_option("step", "train:sgd")
        await self._ab(base, strict_flags)
        await self._check_determinism(strict_flags)
        self._set_run_option("step", "infer")

        await self._announce(5, steps[4], total)
        if quant_installed():  # the same flags, B's Linear layers in int8 weights (float8 on a GPU that runs it)
            a_options, b_options = FP8_ARMS if fp8 else QUANT_ARMS
            await self._ab(base, base, b_options, a_options)
        else:
            await asyncio.sleep(self.pace)

        await self._announce(6, steps[5], total)
        app.main.show_tab("memory")
        released = memory.last_release
        memory.release()
        await self._wait(lambda: memory.last_release is not released, timeout=60)
        await asyncio.sleep(self.pace * 2)
        return total
