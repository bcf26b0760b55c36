"""Make screenshots/*.svg from the real app: the attention story (--demo hf:llama: math against flash, the kernels,
a fallback, the sequence sweep, generation), the main screen after a run, two runs compared, the layer table,
the throughput search, the profiler's top operators, the run history with two runs compared, a run against the
baseline marked in History, a random
shape schedule, an interleaved A/B with its verdict, the kernel table, a training step's layers, A/B and
kernels per pass, a run's time per layer and its timing modes, a quantized run and an A/B of its scheme, and the
hands-free demo.

    PYTHONPATH=tui .venv/bin/python scripts/make_screenshots.py [--model mobilenet_v3_small] [--iters 60]

Each view twice: at 100x30 (name.svg) and at the README's smallest promised size, 80x24 (name-80x24.svg).

Drives the app with Pilot as a user would (type to pick a model, r to run, flip a flag, switch tabs,
t to find the largest batch, p to profile, m to mark two runs in the history, the run options, a flag
flipped in A/B mode, k for the kernels, --demo)
and saves each view with App.save_screenshot. Real timings: the numbers are this machine's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tui"))

from torchperf_tui.app.factory import make_app  # noqa: E402

SIZES = {"": (100, 30), "-80x24": (80, 24)}  # file-name suffix -> terminal size


async def wait_until(pilot, predicate, timeout: float = 300.0, what: str = "condition") -> None:
    """Let the app run until `predicate()` holds, sleeping between looks: Pilot's pause messages every widget and
    refreshes the screen at each look, and the runs being pictured were marked 'noisy host' for it (others at
    0.4-0.8 of a core beside them; the app alone takes 0.07 while a run is drawn, bench/run_ui_cpu.py)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def fresh_app(out: Path, suffix: str, history: Path, **options):
    """(app, saved, shoot): an app on an emptied history file of its own (the History view shows only this script's
    runs), the list of files it saved, and its shoot(name)."""
    history.unlink(missing_ok=True)
    app = make_app(interval=0.5, history_path=str(history), **options)
    saved: list[Path] = []
    return app, saved, shooter(app, out, suffix, saved)


def shooter(app, out: Path, suffix: str, saved: list[Path]):
    """await shoot(name): save the screen as out/name{suffix}.svg (cursors still, toasts gone) and list it."""
    async def shoot(name: str) -> None:
        for field in app.query("Input"):
            field.cursor_blink = False
        app.clear_notifications()
        # The toasts leave the screen at its next refresh: saving in the same moment could still catch one.
        deadline = time.monotonic() + 5
        while app.query("Toast") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        app.save_screenshot(filename=f"{name}{suffix}.svg", path=str(out))
        saved.append(out / f"{name}{suffix}.svg")
    return shoot


async def visit(pilot, shoot, key: str, name: str, settle: float = 0.5, until=None, what: str = "") -> None:
    """Press `key` (a tab, or a job's key), wait until `until()` holds (the job's result is in), let the view
    draw, and save it as `name`."""
    await pilot.press(key)
    if until is not None:
        await wait_until(pilot, until, what=what)
    await pilot.pause(settle)
    await shoot(name)


async def pick(pilot, model: str) -> None:
    """Wait for the engine, then type the model's name into the picker as a user would, and wait for its
    analysis."""
    app = pilot.app
    await wait_until(pilot, lambda: app.session.report is not None and app.main.panes_mounted()
                     and app.pane("flags").flags is not None
                     and app.main.query_one("#model-list").option_count > 1, what="the engine")
    await pilot.press("slash", *model, "enter")
    await wait_until(pilot, lambda: app.pane("picker").complexity is not None, what="the model analysis")
    await pilot.press("escape")


async def make(out: Path, model: str, flag: str, warmup: int, iters: int, max_batch: int,
               history: Path, suffix: str = "") -> list[Path]:
    app, saved, shoot = fresh_app(out, suffix, history, warmup=warmup, iters=iters, max_batch=max_batch)
    runs = app.session.runs
    async with app.run_test(size=SIZES[suffix]) as pilot:
        await pick(pilot, model)
        await pilot.press("r")
        await wait_until(pilot, lambda: runs.get(1) is not None and runs.get(1).finished,
                         what="run 1")
        await pilot.pause(0.5)
        await shoot("main")
        await pilot.click(f"#flag-{flag}")  # flipping a flag starts run 2 with the new flags
        await wait_until(pilot, lambda: runs.get(2) is not None and runs.get(2).finished,
                         what="run 2")
        await visit(pilot, shoot, "2", "compare")
        await visit(pilot, shoot, "3", "layers")
        await visit(pilot, shoot, "5", "memory", settle=1.0)
        await visit(pilot, shoot, "4", "device", settle=0.3)
        await visit(pilot, shoot, "t", "throughput", settle=1.0, what="the throughput search",
                    until=lambda: "largest batch" in str(app.main.query_one("#throughput-summary").render())
                    or "no batch fits" in str(app.main.query_one("#throughput-summary").render()))
        await visit(pilot, shoot, "p", "profile", what="the profile",
                    until=lambda: app.main.query_one("#profile").result is not None)
        await pilot.press("8")
        await wait_until(pilot, lambda: app.main.query_one("#history-table").row_count >= 2, what="the history")
        await pilot.press("m", "down", "m")
        await pilot.pause(0.5)
        await shoot("history")
        await pilot.press("b")  # the highlighted run (the older one) is the baseline; the next run is shown against it
        await pilot.press("1", "r")
        await wait_until(pilot, lambda: "against the baseline" in str(app.main.query_one("#run-baseline").render()),
                         what="the run against the baseline")
        await pilot.pause(0.5)
        await shoot("baseline")
        await pilot.press("8", "b")  # unmarked: the views below are as before

        async def finished_run(set_option) -> None:
            before = app.pane("timing").record
            set_option()
            await wait_until(pilot, lambda: app.pane("timing").record is not before
                             and app.pane("timing").record.finished, what="the run")
            await pilot.pause(0.8)

        await pilot.press("1")
        await finished_run(lambda: setattr(app.main.query_one("#option-shapes"), "value", "random"))
        await shoot("shapes")
        await finished_run(lambda: setattr(app.main.query_one("#option-shapes"), "value", "fixed"))
        app.main.query_one("#option-flip").value = "ab"
        await pilot.pause(0.2)
        await pilot.click(f"#flag-{flag}")  # back: in A/B mode the flip compares the two flag sets
        await wait_until(pilot, lambda: ab_done(app),
                         what="the A/B comparison")
        await pilot.pause(1.0)
        await shoot("ab")
        await visit(pilot, shoot, "k", "kernels", what="the kernels",
                    until=lambda: app.main.query_one("#kernels").result is not None)
    return saved


async def make_training(out: Path, model: str, flag: str, warmup: int, iters: int, history: Path,
                        suffix: str = "") -> list[Path]:
    """A training step (step train · sgd, batch 4): its layers with the backward per layer, an A/B of the flag
    flipped in A/B mode, and the kernels of each conv layer per pass (forward, input and weight gradient)."""
    app, saved, shoot = fresh_app(out, suffix, history, warmup=warmup, iters=iters)
    async with app.run_test(size=SIZES[suffix]) as pilot:
        await pick(pilot, model)
        app.main.query_one("#batch").value = "4"
        app.main.query_one("#option-flip").value = "ab"
        app.main.query_one("#option-step").value = "train:sgd"  # analysed again, with the backward
        await wait_until(pilot, lambda: app.pane("picker").complexity is not None
                         and app.pane("picker").complexity.step == "train", what="the training analysis")
        await visit(pilot, shoot, "3", "train-layers")
        await pilot.press("1")
        await pilot.click(f"#flag-{flag}")  # in A/B mode: both flag sets, training steps, interleaved
        await wait_until(pilot, lambda: ab_done(app), what="the A/B of training steps")
        await pilot.pause(1.0)
        await shoot("train-ab")
        await visit(pilot, shoot, "k", "train-kernels", what="the kernels",
                    until=lambda: app.main.query_one("#kernels").result is not None)
    return saved


async def make_why(out: Path, model: str, warmup: int, iters: int, history: Path, suffix: str = "") -> list[Path]:
    """The "why" views: a run's time per layer (l, Layers tab) and the timing modes side by side (M, Timing)."""
    app, saved, shoot = fresh_app(out, suffix, history, warmup=warmup, iters=iters)
    async with app.run_test(size=SIZES[suffix]) as pilot:
        await pick(pilot, model)
        await pilot.press("r")
        await wait_until(pilot, lambda: app.pane("layers")._run is not None, what="the run's roofline")
        await visit(pilot, shoot, "l", "layer-times", what="the layer times",
                    until=lambda: app.pane("layers")._timed is not None)
        await pilot.press("1", "M")
        await wait_until(pilot, lambda: app.pane("timing").last_modes is not None, what="the timing modes")
        await pilot.pause(0.8)
        await shoot("modes")
    return saved


# The attention story's llama: small enough for a CPU box, long enough for math's S x S scores to show.
ATTENTION_ARGS = ("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,num_key_value_heads=4,"
                  "vocab_size=256,max_position_embeddings=512,attention_dropout=0.1")


async def make_attention(out: Path, history: Path, suffix: str = "", config: str = "small") -> list[Path]:
    """The attention story (--demo hf:llama): math against flash with the verdict, the kernel each ran and a fallback
    with its reason, the sequence sweep's two arms, generation per token. `config` "small": ATTENTION_ARGS at sequence
    256, for a CPU box (the sweep stops at its 512 positions); "demo": the demo's own config and length, as
    `torchperf-tui --demo hf:llama` plays it (a GPU's: the sweep reaches 2,048)."""
    from torchperf_tui.app.demo_attention import demo_inputs

    model_args, seq_len = (ATTENTION_ARGS, "256") if config == "small" else demo_inputs("hf:llama", "", "")
    app, saved, shoot = fresh_app(out, suffix, history, model="hf:llama", model_args=model_args, seq_len=seq_len,
                                  demo=True, demo_pace=1.5, warmup=2, iters=20)

    def kernels():
        return app.main.query_one("#kernels").result if app.main is not None and app.main.panes_mounted() else None

    def fallback_shown() -> bool:  # the second kernel view: a training step, math allowed beside flash
        return kernels() is not None and "+" in kernels().b_spec

    async with app.run_test(size=SIZES[suffix]) as pilot:
        for name, done in (("attention-ab", lambda: ab_done(app)),
                           ("attention-kernels", lambda: kernels() is not None),
                           ("attention-fallback", fallback_shown),
                           ("attention-sweep", lambda: app.pane("sweep").result is not None),
                           ("attention-generate", lambda: app.pane("generation").result is not None)):
            await wait_until(pilot, done, what=name)  # shot under its own banner: the next comes after the pace
            await pilot.pause(0.5)
            await shoot(name)
    return saved


# A small llama for the low-precision views: int8 weight-only on its Linear layers, on a CPU box.
QUANT_ARGS = "num_hidden_layers=2,hidden_size=256,intermediate_size=512,num_attention_heads=4,num_key_value_heads=4"


async def make_quant(out: Path, history: Path, suffix: str = "") -> list[Path]:
    """Low precision: a run of the model quantized (int8 weight-only: what was converted, the drift from float32,
    the prediction), then in A/B mode the scheme turned off again: float32 against int8wo with the verdict, B's
    drift and the prediction beside the measured ratio."""
    app, saved, shoot = fresh_app(out, suffix, history, model="hf:llama", model_args=QUANT_ARGS, seq_len="128",
                                  warmup=2, iters=20)
    async with app.run_test(size=SIZES[suffix]) as pilot:
        await wait_until(pilot, lambda: app.main.panes_mounted() and app.pane("picker").complexity is not None
                         and app.session.report is not None, what="the model's analysis")
        app.main.query_one("#option-quant").value = "int8wo"  # a run starts
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the quantized run")
        await pilot.pause(0.8)
        await shoot("quant")
        app.main.query_one("#option-flip").value = "ab"
        app.main.query_one("#option-quant").value = "off"  # A: int8wo as it was, B: none
        await wait_until(pilot, lambda: ab_done(app, first_arm=2), what="the A/B of the scheme")
        await pilot.pause(1.0)
        await shoot("quant-ab")
    return saved


def ab_done(app, first_arm: int = 0) -> bool:
    """The latest A/B (its A arm run #first_arm or later) has finished."""
    if not app.main.panes_mounted():
        return False
    arms = app.pane("compare").ab_runs
    if arms is None or arms[0] < first_arm:
        return False
    record = app.session.runs.get(arms[1])
    return record is not None and record.finished


async def make_demo(out: Path, model: str, history: Path) -> list[Path]:
    """The demo during its second step (random shapes), banner shown."""
    app = make_app(model=model, demo=True, demo_pace=1.0, warmup=3, iters=30, history_path=str(history))
    async with app.run_test(size=SIZES[""]) as pilot:
        await wait_until(pilot, lambda: ab_done(app, first_arm=3), what="the demo's second comparison")
        await pilot.pause(0.3)
        for field in app.query("Input"):
            field.cursor_blink = False
        app.clear_notifications()
        app.save_screenshot(filename="demo.svg", path=str(out))
    return [out / "demo.svg"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v3_small")
    parser.add_argument("--flag", default="mkldnn_enabled", help="the flag switch flipped for run 2")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=60)
    parser.add_argument("--max-batch", type=int, default=64, help="the bound of the throughput search")
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--history", type=Path, default=Path("/tmp/torchperf-screenshots-history.jsonl"),
                        help="a history file of its own (emptied first), so the History view shows these runs")
    parser.add_argument("--only", choices=VIEWS, action="append",
                        help="only these views (again for more): " + ", ".join(VIEWS) + "; default all")
    parser.add_argument("--attention-config", choices=("small", "demo"), default="small",
                        help="the attention story's llama: small (a CPU box's, sequence 256) or the demo's own "
                             "(scripts/gpu_check.sh on a GPU)")
    parser.add_argument("--sizes", choices=[f"{w}x{h}" for w, h in SIZES.values()], action="append",
                        help="only at these terminal sizes (again for more); default both")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    suffixes = [s for s, (w, h) in SIZES.items() if not args.sizes or f"{w}x{h}" in args.sizes]
    for view in args.only or VIEWS:
        for suffix in suffixes if view != "demo" else [""]:
            for path in asyncio.run(make_view(view, args, suffix)):
                print(path)


# Each group of views, in the order they are made: a name for --only, and how it is made at one size.
VIEWS = ("attention", "why", "training", "quant", "main", "demo")


def make_view(view: str, args, suffix: str):
    if view == "attention":
        return make_attention(args.out, args.history, suffix, args.attention_config)
    if view == "why":
        return make_why(args.out, args.model, args.warmup, args.iters, args.history, suffix)
    if view == "quant":
        return make_quant(args.out, args.history, suffix)
    if view == "training":
        return make_training(args.out, args.model, args.flag, args.warmup, args.iters, args.history, suffix)
    if view == "main":
        return make(args.out, args.model, args.flag, args.warmup, args.iters, args.max_batch, args.history, suffix)
    return make_demo(args.out, args.model, args.history)


if __name__ == "__main__":
    main()
