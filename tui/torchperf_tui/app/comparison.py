"""The app's comparisons of two flag sets: interleaved A/B timing with a verdict, and the kernels each
conv layer ran under each set. A mixin of TorchperfApp (app.py), kept apart so each file has one job.

A is the flags before the last flip, B the flags now. Both jobs run in the measurement process; an A/B and
a plain timing run replace each other, so two measurements never share the machine.
"""

from __future__ import annotations

from torchperf_tui.engine.errors import user_message
from torchperf_tui.app.guards import while_running
from torchperf_tui.app.messages import AnalysisFailed, ComparisonBlock, ComparisonFinished, KernelsFinished
from torchperf_tui.app.runs import RunRecord
from torchperf_tui.app.widgets.compare.compare_pane import ComparePane
from torchperf_tui.app.widgets.kernels.kernels_pane import KernelsPane
from torchperf_tui.app.widgets.picker.model_picker import ModelPicker
from torchperf_tui.worker.protocol import JobDone, JobFailed, Progress

AB_BLOCKS = 10


class ComparisonActions:
    """A/B (key a, or a flag flip with 'on flip: A/B') and kernels (key k)."""

    _ab_seq = 0
    _ab_runs: tuple[int, int] | None = None
    _kernels_seq = 0
    _kernels_job: int | None = None
    previous_flags = None  # the flags before the last flip: arm A

    def _arms(self):
        """(A, B): the flags before the last flip and the flags now; None when they are the same."""
        a = self.previous_flags if self.previous_flags is not None else self.engine.flags.Flags()
        return (a, self.flags) if a != self.flags else None

    def action_compare_ab(self) -> None:
        """Time the flags before the last flip (A) against the current ones (B), interleaved in blocks."""
        if not self._ready_for("abtest", "A/B comparison"):
            return
        arms = self._arms()
        if arms is None:
            self.notify("flip a flag first: A/B compares the flags before the flip with the current ones",
                        severity="warning")
            return
        self.start_comparison(*arms)

    def start_comparison(self, flags_a, flags_b) -> None:
        self._mark_cancelling()
        for arm in ("A", "B"):  # a comparison in flight is replaced: its result will be dropped
            record = self._ab_record(arm)
            if record is not None and not record.finished:
                record.status = "cancelled"
        if self.run_options.get("compile", "eager") != "eager":
            self.notify("A/B compares the flag sets eager: compiled A/B is not supported", severity="warning")
        self._ab_seq += 1
        kind = self.device_kind()
        records = []
        for arm, flags in (("A", flags_a), ("B", flags_b)):
            self._run_seq += 1
            record = RunRecord(run_id=self._run_seq, model=self.spec, device=self._resolved_device(), flags=flags,
                               flags_text=flags.describe(kind), arm=arm,
                               shapes=self.run_options["shapes"], status="starting")
            self.history.add(record)
            records.append(record)
        self._ab_runs = (records[0].run_id, records[1].run_id)
        self.history.baseline_id = records[0].run_id  # speed-ups read B against A
        self.current_run_id = None
        self.action_show_tab("compare")
        self.main.query_one(ComparePane).show_verdict(
            f"A/B: [b]{records[0].flags_text}[/] vs [b]{records[1].flags_text}[/] · interleaved in "
            f"{AB_BLOCKS} randomised blocks per arm…")
        self._refresh_compare()
        ab_id = self._ab_seq
        try:
            base = self._bench_config(self.spec, self.main.query_one(ModelPicker).settings(), flags_a)
        except Exception as exc:
            self.post_message(AnalysisFailed("compare", ab_id, user_message(exc)))
            return
        batch = base.batch or 1

        def handle(event) -> None:
            if isinstance(event, Progress):
                arm, index, total, samples = event.data
                self.post_message(ComparisonBlock(ab_id, arm, index, total, list(samples), batch))
            elif isinstance(event, JobFailed) and event.cancelled:
                self.post_message(AnalysisFailed("compare", ab_id, "cancelled"))
            elif isinstance(event, JobFailed):
                self.post_message(AnalysisFailed("compare", ab_id, event.error))
            elif isinstance(event, JobDone):
                self.post_message(ComparisonFinished(ab_id, event.result))
                if not event.result.cancelled:
                    self.save_to_history(event.result, event.extra.get("fingerprint"))

        self.cancel_job(self._run_job)  # A/B and a plain run replace each other: one measurement at a time
        self._run_job = self.submit("ab", {"base": base, "a": flags_a, "b": flags_b, "blocks": AB_BLOCKS,
                                           "per_block": max(3, self.iters // 5), "seed": ab_id,
                                           "device_kind": self.device_kind()},
                                    f"comparing A/B on {self.spec}", handle)

    def _ab_record(self, arm: str) -> RunRecord | None:
        if self._ab_runs is None:
            return None
        return self.history.get(self._ab_runs[0 if arm == "A" else 1])

    @while_running
    def on_comparison_block(self, message: ComparisonBlock) -> None:
        if message.ab_id != self._ab_seq:
            return
        record = self._ab_record(message.arm)
        if record is None or record.finished:
            return
        record.samples_ms.extend(message.samples_ms)
        record.status, record.index, record.total = "timed", message.index, message.total
        record.stats = self.engine.timing.compute_stats(record.samples_ms, batch=message.batch)
        self.main.query_one(ComparePane).show_verdict(
            f"A/B: block {message.index + 1} of {message.total} done ({message.arm}) · the verdict comes at the end")
        self._refresh_compare()

    @while_running
    def on_comparison_finished(self, message: ComparisonFinished) -> None:
        if message.ab_id != self._ab_seq:
            return
        result = message.result
        batch = result.input_shape[0]
        for arm_result, arm in ((result.a, "A"), (result.b, "B")):
            record = self._ab_record(arm)
            if record is None:
                continue
            record.samples_ms = list(arm_result.samples_ms)
            record.stats = self.engine.timing.compute_stats(record.samples_ms, batch=batch)
            record.status = "cancelled" if result.cancelled else "done"
            record.verdict = result.verdict
        self.main.query_one(ComparePane).show_verdict(ab_verdict_text(result))
        if result.verdict is not None:
            self.notify(result.summary(), title="A/B verdict", timeout=8)
        self._refresh_compare()

    def comparison_failed(self, ab_id: int, error: str) -> None:
        if ab_id != self._ab_seq:
            return
        cancelled = error == "cancelled"
        for arm in ("A", "B"):
            record = self._ab_record(arm)
            if record is not None and not record.finished:
                record.status, record.error = ("cancelled", None) if cancelled else ("failed", error)
        self.main.query_one(ComparePane).show_verdict("A/B: cancelled" if cancelled
                                                      else f"A/B: [b $error]error:[/] {error}")
        self._refresh_compare()

    # -- kernels: what each conv layer ran under A and under B ----------------------------
    def action_kernels(self) -> None:
        """Profile the conv layers under the flags before the last flip (A) and now (B), side by side."""
        if not self._ready_for("kernels", "kernel view") or self._measuring("kernel profile"):
            return
        a, b = self._arms() or (self.flags, self.flags)
        self._kernels_seq += 1
        self.action_show_tab("kernels")
        kind = self.device_kind()
        self.main.query_one(KernelsPane).show_status(
            f"[b]{self.spec}[/] · profiling each conv layer under A: {a.describe(kind)} and B: {b.describe(kind)}…")
        job_id = self._kernels_seq
        try:
            base = self._bench_config(self.spec, self.main.query_one(ModelPicker).settings(), a)
        except Exception as exc:
            self.post_message(AnalysisFailed("kernels", job_id, user_message(exc)))
            return

        def handle(event) -> None:
            if isinstance(event, JobFailed) and event.cancelled:
                return  # replaced before it began by a newer kernel view
            if isinstance(event, JobFailed):
                self.post_message(AnalysisFailed("kernels", job_id, event.error))
            elif isinstance(event, JobDone):
                self.post_message(KernelsFinished(job_id, event.result))

        self.cancel_job(self._kernels_job)  # a newer request replaces the one in flight
        self._kernels_job = self.submit("kernels", {"base": base, "a": a, "b": b, "device_kind": kind},
                                        f"profiling the conv kernels of {self.spec}", handle)

    @while_running
    def on_kernels_finished(self, message: KernelsFinished) -> None:
        if message.job_id == self._kernels_seq:
            self.main.query_one(KernelsPane).show_result(message.result)


def ab_verdict_text(result) -> str:
    """The verdict line of the Compare view: each arm's median and CI, then the verdict."""
    def arm_text(name, arm) -> str:
        from torchperf_tui.formatting import format_ms

        ci = "" if arm.ci_low_ms is None else f" (CI {format_ms(arm.ci_low_ms)} - {format_ms(arm.ci_high_ms)})"
        return f"{name} {format_ms(arm.median_ms)}{ci}"

    head = (f"A/B, {len(result.order) // 2} interleaved block pairs: {arm_text('A', result.a)} · "
            f"{arm_text('B', result.b)}")
    verdict = result.verdict
    if verdict is None or not verdict.significant:
        style = "$text-muted"
    else:
        style = "$success" if verdict.ratio < 1 else "$error"
    return f"{head}\n[b {style}]{result.summary()}[/]"
