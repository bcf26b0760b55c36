"""The measurement process's check, before a job that runs a model under flags: an SDPA set that leaves the
model's attention no backend on its device is refused in one line (engine/analysis/attention_kernels.py:
documented constraints first, then the model's own calls run under the set), not a traceback from inside the
forward. Jobs whose flags allow every backend (the default) skip it and import nothing.
"""

from __future__ import annotations

from typing import Any, Callable

CHECKED = ("time", "ab", "modes", "throughput", "profile", "determinism", "memsnap", "cli.bench", "cli.profile",
           "cli.roofline", "cli.compare", "cli.determinism", "cli.memsnap")


def _attention_sets(params: dict) -> list[tuple[Any, Any]]:
    """(config, flags) for each flag set the job's params run: its cfg's, or the base's and each arm's (an arm's
    own dtype and step where its SPEC sets them)."""
    import dataclasses

    cfg = params.get("cfg") or params.get("base")
    if cfg is None or not hasattr(cfg, "flags"):
        return []
    sets = [(cfg, cfg.flags)] if "a" not in params else []
    for arm in (params.get(name) for name in ("a", "b")):
        if arm is None:
            continue
        flags = getattr(arm, "flags", arm)
        changes = {key: getattr(arm, key) for key in ("dtype", "step", "amp") if getattr(arm, key, None)}
        sets.append((dataclasses.replace(cfg, **changes) if changes else cfg, flags))
    return sets


def _checking_attention(runner: Callable[[dict, Any], tuple[Any, dict]]):
    def run(params: dict, ctx: Any) -> tuple[Any, dict]:
        sets = [(cfg, flags) for cfg, flags in _attention_sets(params) if getattr(flags, "sdpa", "all") != "all"]
        if sets:
            from torchperf_tui.engine.analysis.attention_kernels import check_attention_sets

            for cfg, flags in sets:
                check_attention_sets(cfg, [flags])
        return runner(params, ctx)

    run.__doc__ = runner.__doc__
    return run


def check_attention_first(runners: dict) -> None:
    """Wrap, in place, the runners of the jobs that run a model under flags."""
    for kind in CHECKED:
        if kind in runners:
            runners[kind] = _checking_attention(runners[kind])
