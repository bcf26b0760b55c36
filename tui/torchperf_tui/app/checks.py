"""The app's one-shot checks of the chosen model: the determinism check (key d: the same input twice
under the current flags, bitwise equal or how far apart) and a CUDA memory snapshot (key n). A mixin of
TorchperfApp (app.py), kept apart so each file has one job."""

from __future__ import annotations

from torchperf_tui.engine.errors import user_message
from torchperf_tui.app.guards import while_running
from torchperf_tui.app.messages import AnalysisFailed, CheckFinished
from torchperf_tui.app.widgets.picker.model_picker import ModelPicker
from torchperf_tui.app.widgets.timing.timing_pane import TimingPane
from torchperf_tui.worker.protocol import JobDone, JobFailed


class CheckActions:
    _determinism_seq = 0
    _memsnap_seq = 0
    _check_jobs: dict  # kind -> the job id in flight, set by the app

    def action_check_determinism(self) -> None:
        """Run the chosen model twice on one input under the current flags: bitwise equal, or how far apart."""
        if not self._ready_for("determinism", "determinism check") or self._measuring("determinism check"):
            return
        self._determinism_seq += 1
        self.main.query_one(TimingPane).show_note(
            f"determinism: running {self.spec} twice under {self.flags.describe(self.device_kind())}…")
        self._submit_check("determinism", self._determinism_seq, f"checking determinism of {self.spec}")

    def _submit_check(self, kind: str, job_id: int, what: str) -> None:
        try:
            cfg = self._bench_config(self.spec, self.main.query_one(ModelPicker).settings(), self.flags)
        except Exception as exc:
            self.post_message(AnalysisFailed(kind, job_id, user_message(exc)))
            return

        def handle(event) -> None:
            if isinstance(event, JobFailed) and event.cancelled:
                return  # replaced before it began by a newer check of the same kind
            if isinstance(event, JobFailed):
                self.post_message(AnalysisFailed(kind, job_id, event.error))
            elif isinstance(event, JobDone):
                self.post_message(CheckFinished(kind, job_id, event.result))

        self.cancel_job(self._check_jobs.get(kind))  # a newer check of a kind replaces the one in flight
        self._check_jobs[kind] = self.submit(kind, {"cfg": cfg}, what, handle)

    def action_memory_snapshot(self) -> None:
        """Record the CUDA allocator's history over a few iterations; say where the snapshot went."""
        if not self._ready_for("memsnap", "memory snapshot") or self._measuring("memory snapshot"):
            return
        if self.device_kind() != "cuda":
            self.notify(self.engine.memsnap.NOT_CUDA, title="memory snapshot", severity="warning", timeout=8)
            return
        self._memsnap_seq += 1
        self.notify(f"recording the allocator's history over {self.spec}…", title="memory snapshot", timeout=3)
        self._submit_check("memsnap", self._memsnap_seq, f"recording the allocator's history over {self.spec}")

    @while_running
    def on_check_finished(self, message: CheckFinished) -> None:
        seq = self._determinism_seq if message.kind == "determinism" else self._memsnap_seq
        if message.job_id != seq:
            return
        result = message.result
        if message.kind == "determinism":
            self.last_determinism = result
            style = "$success" if result.bitwise_equal else "$warning"
            self.main.query_one(TimingPane).show_note(f"[b {style}]determinism:[/] {result.summary()}")
            self.notify(result.summary(), title="determinism check", timeout=8)
        elif result.path:
            self.notify(f"snapshot saved to {result.path}\n{result.viewer_hint}", title="memory snapshot",
                        timeout=12)
        else:
            self.notify("no snapshot written (cancelled)", title="memory snapshot", severity="warning")

    last_determinism = None
