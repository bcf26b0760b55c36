"""A result's marks: every reason its numbers may not be the model's alone (what the app saw beside it, the host's
findings, per point where it has points), one line each. Each measurement's result says its own
(`disturbance_marks()`); what measures nothing (a count of FLOPs, a comparison of two records) has none."""

from __future__ import annotations


def disturbance_marks(result) -> list[str]:
    """The marks of `result`, or none where it is not a measurement."""
    marks = getattr(result, "disturbance_marks", None)
    return list(marks()) if marks is not None else []
