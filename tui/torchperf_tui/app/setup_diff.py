"""What a kept run measured, beside the baseline: which parts of the setup differ (model, input and dtype,
step (inference or training, mixed precision), graph mode, shape schedule, device) and which flags. Only
runs whose setup is the same are compared by a speed-up; the others say what differs ("not like for like:
model, input")."""

from __future__ import annotations

SETUP = (("model", "model"), ("input", "input_text"), ("step", "step"), ("graph", "compile"), ("shapes", "shapes"),
         ("device", "device"))


def differences(record, base) -> list[str]:
    """The parts of the setup in which `record` differs from `base` (none: like for like)."""
    return [name for name, attr in SETUP if getattr(record, attr) != getattr(base, attr)]


def setup_text(record) -> str:
    """The whole setup in a few words: 'resnet18 1x3x224x224 float32 · eager · defaults'."""
    parts = [f"{record.model} {record.input_text}".strip(), *([record.step] if record.step != "infer" else []),
             record.compile or "eager"]
    if record.shapes != "fixed":
        parts.append(f"shapes {record.shapes}")
    return " · ".join(parts + [record.flags_text])


def against_text(record, base, device_kind: str) -> str:
    """`record` against the baseline: its differing setup, then its flags against the baseline's."""
    values = {"model": record.model, "input": record.input_text, "step": record.step,
              "graph": record.compile or "eager",
              "shapes": record.shapes, "device": record.device}
    parts = [values[name] for name in differences(record, base)]
    if record.flags is not None and base.flags is not None:
        parts.append(record.flags.describe(device_kind, against=base.flags))
    else:
        parts.append(record.flags_text)
    return " · ".join(p for p in parts if p)


def speedup_text(record, base) -> str:
    """'1.18x' (baseline median / run median) for a like-for-like complete run, else why not."""
    if record is base:
        return "baseline"
    if not (record.complete and base.complete and record.stats and base.stats):
        return "–"
    unlike = differences(record, base)
    if unlike:
        return f"n/a: {', '.join(unlike)}"
    ratio = base.stats.p50_ms / record.stats.p50_ms
    # Three significant figures below 1x, so a run 150 times slower reads 0.00672x, not 0.01x.
    return f"{ratio:.2f}x" if ratio >= 1 else f"{ratio:.3g}x"
