"""A run's numerics in words: what its quantization scheme converted (engine/workloads/quantization.QuantReport) and
how far its outputs drifted (engine/measurements/drift.Drift), for the CLI's rows and the panes' lines alike."""

from __future__ import annotations

from collections import Counter

from torchperf_tui.core.formatting import format_ms, format_number
from torchperf_tui.engine.measurements.drift import FLOAT32
from torchperf_tui.wording import WARNING, Row, row

# Below this SQNR a drift is worth a second look: int8 weight-only typically keeps 30-45 dB on a model's outputs,
# and 20 dB is an error a tenth of the signal's size.
LOW_SQNR_DB = 20.0


def quant_text(report) -> str:
    """'int8wo: 1 Linear converted (head.fc); 40 layers left as they were: 39 not a Linear, 1 too small'."""
    converted = report.converted
    names = f" ({', '.join(converted)})" if 0 < len(converted) <= 3 else ""
    text = f"{report.scheme}: {format_number(len(converted))} Linear converted{names}"
    if not converted:
        text = f"{report.scheme}: no layer converted (no Linear large enough)"
    if report.left:
        reasons = Counter(_kind(why) for _, why in report.left)
        said = ", ".join(f"{count} {reason}" for reason, count in reasons.most_common())
        left = len(report.left)
        text += (f"; {format_number(left)} layer{'s' if left != 1 else ''} left as "
                 f"{'they were' if left != 1 else 'it was'}: {said}")
    return text


def _kind(why: str) -> str:
    """A reason a layer was left, without its sizes: 'too small: 8 in, 4 out' -> 'too small'."""
    return why.split(":")[0]


def drift_text(drift) -> str:
    """'SQNR 42.9 dB, max error 0.0085, arg-max changed at 0 of 1 position': the figures of a drift, or that they
    are not finite."""
    if not drift.finite:
        return "not finite: the outputs hold a NaN or an infinity"
    sqnr = "identical outputs" if drift.sqnr_db is None else f"SQNR {drift.sqnr_db:.1f} dB"
    text = f"{sqnr}, max error {drift.max_abs_error:.3g}"
    if drift.argmax_changed is not None:
        changed = round(drift.argmax_changed * drift.positions)
        text += (f", arg-max changed at {format_number(changed)} of {format_number(drift.positions)} "
                 f"position{'s' if drift.positions != 1 else ''}")
    return text


def drift_level(drift) -> str:
    """WARNING for a drift that is not finite, or whose SQNR is below LOW_SQNR_DB."""
    low = drift.sqnr_db is not None and drift.sqnr_db < LOW_SQNR_DB
    return WARNING if not drift.finite or low else ""


def numerics_rows(result) -> list[Row]:
    """The CLI's rows of a run: its quantization, then its drift from the float32 model (with what was compared)."""
    rows = []
    report = getattr(result, "quantized", None)
    if report is not None:
        rows.append(row("quantization", quant_text(report)))
    drift = getattr(result, "drift", None)
    if drift is not None:
        rows.append(row("drift", f"{drift_text(drift)} ({drift.outputs} against {drift.against})",
                        drift_level(drift)))
    return rows + prediction_rows(result)


def numerics_brief(result) -> list[tuple[str, str]]:
    """The compact form of numerics_rows, for a short screen: ('quant int8wo: 1 Linear', ''), ('drift SQNR 42.7 dB',
    level)."""
    parts = []
    report = getattr(result, "quantized", None)
    if report is not None:
        parts.append((f"quant {report.scheme}: {format_number(len(report.converted))} Linear", ""))
    drift = getattr(result, "drift", None)
    if drift is not None:
        sqnr = ("drift not finite" if not drift.finite else "no drift: identical outputs" if drift.sqnr_db is None
                else f"drift SQNR {drift.sqnr_db:.1f} dB")
        parts.append((sqnr, drift_level(drift)))
    return parts


def prediction_text(prediction) -> str:
    """'int8wo on 2 Linear: 0.012 ms -> 0.004 ms a pass, 2 of 2 memory-bound as they are (float32 compute and copy
    ceilings measured here)', or why there is none."""
    if prediction.missing is not None:
        return f"none for {prediction.scheme}: {prediction.missing}"
    layers = prediction.layers
    if not layers:
        return f"none for {prediction.scheme}: no Linear it converts"
    memory = sum(layer.now_bound == "memory" for layer in layers)
    return (f"{prediction.scheme} on {format_number(len(layers))} Linear: {format_ms(prediction.now_ms)} -> "
            f"{format_ms(prediction.quantized_ms)} a pass, {memory} of {len(layers)} memory-bound as they are "
            f"({prediction.ceilings})")


def prediction_rows(result) -> list[Row]:
    """A quantized run's prediction: the pass quantized over as it is, predicted from its Linear layers' GEMMs (what
    no Linear owns held at the measured time), and the per-layer sums it rests on."""
    prediction = getattr(result, "prediction", None)
    if prediction is None:
        return []
    ratio = getattr(result, "predicted_ratio", None)
    head = f"quantized/as it is {ratio:.2f} predicted · " if ratio is not None else ""
    return [row("prediction", head + prediction_text(prediction))]


def ab_numerics_rows(result, brief: bool = False) -> list[Row]:
    """An A/B's rows: each arm's quantization, then B's drift against A (said beside the verdict: what B's speed
    costs in accuracy), then the prediction beside the measured ratio. Where both arms change numerics, each arm's
    drift from the float32 model comes first; where one arm is the float32 model at full precision, B against A is
    the other's drift, said once. `brief`: a pane's short form (the scheme's counts, the drift's figures alone, no
    prediction's reasons), for a screen that must keep its runs table in sight."""
    rows = []
    for name, arm in (("A", result.a), ("B", result.b)):
        report = getattr(arm, "quantized", None)
        if report is not None:
            text = (f"{report.scheme} on {format_number(len(report.converted))} Linear, "
                    f"{format_number(len(report.left))} left" if brief else quant_text(report))
            rows.append(row(f"arm {name} quantization", text))
    drifts = {name: getattr(arm, "drift", None) for name, arm in (("A", result.a), ("B", result.b))}
    if all(drift is not None for drift in drifts.values()) and not brief:
        for name, drift in drifts.items():
            rows.append(row(f"arm {name} drift", f"{drift_text(drift)} ({drift.outputs} against {drift.against})",
                            drift_level(drift)))
    drift = getattr(result, "drift_b", None)
    if drift is not None:
        plain = [name for name, arm_drift in drifts.items() if arm_drift is None]
        whose = f"; {plain[0]} is {FLOAT32}" if len(plain) == 1 and not brief else ""
        rows.append(row("B against A", f"{drift_text(drift)} ({drift.outputs}{whose})", drift_level(drift)))
    prediction = getattr(result, "prediction", None)
    if prediction is not None:
        predicted = getattr(result, "predicted_ratio", None)
        measured = result.verdict.ratio if result.verdict is not None else None
        if predicted is None:
            text = f"none for {prediction.scheme}" + ("" if brief else f": {prediction_text(prediction).split(': ', 1)[-1]}")
        else:
            text = f"B/A {predicted:.2f} predicted" + (f" · {measured:.2f} measured" if measured is not None else "")
            text += "" if brief else f" · {prediction_text(prediction)}"
        rows.append(row("prediction", text))
    return rows
