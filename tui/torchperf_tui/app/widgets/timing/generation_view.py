"""Generation in the Timing tab (key g): a causal LM's greedy generation with its own KV cache, the prefill (time to
first token) and every decode step timed in the measurement process; the per-token latencies fill a histogram of
their own as they stream, then the figures and the method. A section under the run, its own widget: it owns its
job ("generate"), its lines and its histogram (the timing pane's LatencyHistogram). The words are
wording.generation's (the CLI's `bench --generate` says the same facts)."""

from __future__ import annotations

import dataclasses
import time

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.message import Message
from textual.widgets import Static

from torchperf_tui.app.messages import JobEvent
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.widgets.timing.histogram import LatencyHistogram
from torchperf_tui.app.widgets.timing.run_lines import LIVE_CPU_HISTOGRAM_EVERY_S
from torchperf_tui.measure.protocol import JobDone, JobFailed, Samples
from torchperf_tui.app.runs import save_run
from torchperf_tui.wording.generation import generation_lines

NEW_TOKENS = 64  # engine.measurements.generation.DEFAULT_NEW_TOKENS (the engine is not imported here before a job)
RUNS = 5  # engine.measurements.generation.GENERATE_RUNS
WAITING = "generation: the per-token latencies fill this histogram as they are timed"


class GenerationView(Vertical):
    """The last generation of one model (`model`): what runs, live progress, then the result or why it failed."""

    class Started(Message):
        """A generation was asked for: the lines of a failed run above it are stale."""

    DEFAULT_CSS = """
    GenerationView { height: 1fr; display: none; }
    GenerationView.-yielded { height: auto; }
    GenerationView > Static { height: auto; }
    GenerationView > LatencyHistogram { min-height: 4; }
    """

    def __init__(self) -> None:
        super().__init__(id="generation")
        self.jobs = PaneJobs(self)
        self.model: str | None = None  # the model the section is about
        self.setup = ""  # what is generated, in words
        self.short_setup = ""  # the same without the model's overrides, on a short pane (the sidebar has them)
        self.result = None  # the last GenerationResult
        self.error: str | None = None  # why the last generation failed
        self.ttft_ms: list[float] = []
        self.decode_ms: list[float] = []
        self._on_cpu = False
        self._histogram_at = 0.0
        self._lines: list[str] = []  # in markup: the head, then the figures, then the rest
        self._compact_lines: list[str] = []  # the same on a short pane (the figures and every mark, no method)
        self._run_seen = None  # the timing pane's run when g was pressed: a newer one takes the histogram back

    def compose(self) -> ComposeResult:
        yield Static("", id="generation-lines")
        yield LatencyHistogram(id="generation-histogram")

    def head(self, tail: str = "", short: bool = False) -> str:
        """'generate MODEL · 64 new tokens after the prompt (ARGS) 1x128 float32' and `tail` (markup); `short`,
        without the model's overrides: at 80x24 a llama's args took five lines and the histogram its room."""
        return f"[b]generate[/] {escape(self.short_setup if short else self.setup)}{tail}"

    def say_head(self, tail: str) -> None:
        """The head and `tail` alone (what the generation is doing), the short head on a short pane."""
        self.say(self.head(tail), compact=[self.head(tail, short=True)])

    def say(self, *lines: str, compact: list[str] | None = None) -> None:
        """The section's lines (markup), wrapped at the pane's edge; on a short pane `compact` (else the same)."""
        self._lines = list(lines)
        self._compact_lines = self._lines if compact is None else compact
        self.display = True
        self._show_lines()

    def _show_lines(self) -> None:
        compact = self.parent is not None and self.parent.has_class("-compact")
        self.set_class(compact, "-compact")
        self.query_one("#generation-lines", Static).update("\n".join(self._compact_lines if compact else self._lines))

    def compact(self) -> None:
        """The pane's height crossed COMPACT_BELOW_ROWS (its class changed, maybe after this section's own resize):
        the lines again, in the form that fits."""
        if self._lines:
            self._show_lines()

    def _take_histogram(self, taken: bool) -> None:
        """The per-token histogram in place of the run's (`taken`), or the run's back and this section its lines."""
        self.set_class(not taken, "-yielded")
        self.query_one(LatencyHistogram).display = taken
        if self.parent is not None and self.parent.query("#latency-histogram"):
            self.parent.query_one("#latency-histogram").display = not taken

    def timing_run(self, record) -> None:
        """The timing pane's current run (the screen says when its runs change): a run started after g takes its
        histogram back, and the section goes when it holds no result (a failure, a refusal, a cancelled or
        replaced generation would read as the new run's)."""
        if self.display and record is not None and record is not self._run_seen:
            self._take_histogram(False)
            if self.result is None:
                self.jobs.cancel("generate", enforce=False)  # replaced by the run: its last answer is dropped
                self.error, self._lines = None, []
                self.display = False

    # -- the job -------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Generate NEW_TOKENS tokens after the chosen model's input (its sequence length is the prompt's) under the
        current flags and dtype; a measurement in flight is cancelled."""
        selection = self.screen.ready_selection("generation")
        if selection is None:
            return
        self.screen.show_tab("timing")
        self.post_message(self.Started())
        self._run_seen = getattr(self.parent, "record", None)
        self._take_histogram(True)
        self.model, self.result, self.error = selection.model, None, None
        self.ttft_ms, self.decode_ms = [], []
        cfg = self.jobs.config(selection, self.refused, slot="generate")
        if cfg is None:
            return
        ignored = [name for name, asked in (("step", cfg.step != "infer"), ("graph", cfg.compile is not None),
                                            ("shapes", cfg.shapes != "fixed"), ("amp", cfg.amp is not None)) if asked]
        # Generation is greedy inference on the eager model at one prompt length, in the model's dtype.
        cfg = dataclasses.replace(cfg, step="infer", compile=None, shapes="fixed", amp=None)
        self._on_cpu = self.app.session.device_kind() == "cpu"
        default_shape = self.screen.default_shape()
        self.setup = (f"{selection.model} · {NEW_TOKENS} new tokens after the prompt "
                      f"{selection.input_text(default_shape)} {selection.dtype}")
        self.short_setup = (f"{selection.model} · {NEW_TOKENS} new tokens after "
                            f"{selection.shape_text(default_shape)} {selection.dtype}")
        note = f" (the run options {', '.join(ignored)} do not apply: inference, eager, one prompt)" if ignored else ""
        self.say_head(f": building…{escape(note)}")
        self._histogram([])
        self.jobs.start("generate", {"cfg": cfg, "new_tokens": NEW_TOKENS},
                        f"generating {NEW_TOKENS} tokens with {selection.model}")

    def refused(self, error: str) -> None:
        self.error = error
        self.say(f"generation: [b $error]error:[/] {escape(error)}")
        self._histogram([], empty="generation failed: no samples")

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        message.stop()
        if not self.jobs.current(message):
            return
        event = message.event
        if isinstance(event, Samples):
            self._samples(event)
        elif isinstance(event, JobFailed):
            if event.cancelled:
                self.say_head(": cancelled")
            else:
                self.refused(event.error)
                self.app.notify(event.error, title="generation failed", severity="error", timeout=8)
        elif isinstance(event, JobDone):
            self._finished(event.result, event.extra.get("fingerprint"))

    def _samples(self, event: Samples) -> None:
        if event.phase == "warmup":
            self.say_head(f": warm-up generation, step {event.index + 1}/{event.total}")
            return
        if event.phase == "prefill":
            self.ttft_ms.extend(event.samples_ms)
        elif event.phase == "decode":
            self.decode_ms.extend(event.samples_ms)
        else:
            return
        runs = len(self.ttft_ms)
        steps = event.total // RUNS if event.phase == "decode" and event.total else 0
        token = f", token {event.index % steps + 2}" if steps else ""
        self.say_head(f": run {runs}/{RUNS}{token} · {len(self.decode_ms)} decode steps timed")
        last = event.phase == "decode" and event.index >= event.total - 1
        now = time.monotonic()
        if not self._on_cpu or last or now - self._histogram_at >= LIVE_CPU_HISTOGRAM_EVERY_S:
            # A CPU generation shares the cores with this process: its histogram is redrawn at most every few seconds.
            self._histogram_at = now
            self._histogram(self.decode_ms)

    def _finished(self, result, fingerprint) -> None:
        self.result = result
        self.decode_ms = list(result.decode_ms)
        self.say(self.head(), *(escape(line) for line in generation_lines(result)),
                 compact=[self.head(short=True), *(escape(line) for line in generation_lines(result, compact=True))])
        self._histogram(self.decode_ms)
        if result.cancelled:
            return
        self.app.notify(generation_lines(result)[0], title=f"generation with {result.model}", timeout=6)
        save_run(self, result, fingerprint)

    def _histogram(self, samples, empty: str = WAITING) -> None:
        self.query_one(LatencyHistogram).show_samples(samples, "per output token", empty=empty)

    # -- another model -----------------------------------------------------------------------------------------
    def model_chosen(self, model: str) -> None:
        """Another model: the generation of the last one would read as this one's."""
        if self.model is not None and model != self.model:
            self.jobs.cancel("generate", enforce=False)
            self.model, self.result, self._lines, self._compact_lines = None, None, [], []
            self.display = False
            self._take_histogram(False)
