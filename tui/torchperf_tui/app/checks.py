"""The app's one-shot checks of the chosen model: the determinism check (key d: the same input twice
under the current flags, bitwise equal or how far apart) and a CUDA memory snapshot (key n). A mixin of
TorchperfApp (app.py), kept apart so each file has one job."""

from __future__ import annotations

from textual import work

from torchperf_tui.engine.errors import user_message
from torchperf_tui.app.guards import while_running
from torchperf_tui.app.messages import AnalysisFailed, CheckFinished
from torchperf_tui.app.widgets.picker.model_picker import ModelPicker
from torchperf_tui.app.widgets.timing.timing_pane import TimingPane


class CheckActions:
    _determinism_seq = 0
    _memsnap_seq = 0

    def action_check_determinism(self) -> None:
        """Run the chosen model twice on one input under the current flags: bitwise equal, or how far apart."""
        if not self._ready_for("determinism", "determinism check") or self._measuring("determinism check"):
            return
        self._determinism_seq += 1
        self.main.query_one(TimingPane).show_note(
            f"determinism: running {self.spec} twice under {self.flags.describe(self.device_kind())}…")
        self.check_determinism(self._determinism_seq, self.spec, self.main.query_one(ModelPicker).settings(), self.flags)

    @work(thread=True, exclusive=True, group="determinism", exit_on_error=False)
    def check_determinism(self, job_id: int, spec: str, settings: dict, flags) -> None:
        try:
            cfg = self._bench_config(spec, settings, flags)
            report = self.engine.determinism.check_determinism(
                spec, cfg.resolved_shape(), device=cfg.device, dtype=cfg.dtype, flags=flags, runs=2,
                channels_last=cfg.channels_last)
        except Exception as exc:
            self.post_message(AnalysisFailed("determinism", job_id, user_message(exc)))
            return
        self.post_message(CheckFinished("determinism", job_id, report))

    def action_memory_snapshot(self) -> None:
        """Record the CUDA allocator's history over a few iterations; say where the snapshot went."""
        if not self._ready_for("memsnap", "memory snapshot") or self._measuring("memory snapshot"):
            return
        if self.device_kind() != "cuda":
            self.notify(self.engine.memsnap.NOT_CUDA, title="memory snapshot", severity="warning", timeout=8)
            return
        self._memsnap_seq += 1
        self.notify(f"recording the allocator's history over {self.spec}…", title="memory snapshot", timeout=3)
        self.record_snapshot(self._memsnap_seq, self.spec, self.main.query_one(ModelPicker).settings(), self.flags)

    @work(thread=True, exclusive=True, group="memsnap", exit_on_error=False)
    def record_snapshot(self, job_id: int, spec: str, settings: dict, flags) -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()
        try:
            result = self.engine.memsnap.record_memory_snapshot(self._bench_config(spec, settings, flags),
                                                                should_cancel=lambda: worker.is_cancelled)
        except Exception as exc:
            self.post_message(AnalysisFailed("memsnap", job_id, user_message(exc)))
            return
        self.post_message(CheckFinished("memsnap", job_id, result))

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
