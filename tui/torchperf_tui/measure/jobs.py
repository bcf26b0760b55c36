"""Every kind of job, in one table: what runs it in the measurement process, whether it measures, the CLI commands
that send it, and the app's keys, palette entries and pane that start and show it.

The measurement process finds a kind's runner here (measure/process.py) and the client the kinds that measure
(measure/client.py, app/session.py). The app's key bindings, palette, help screen, panes and warmed engine modules
live in app/ (a floor above this one, which imports Textual): they stay where they are, and tests/
test_job_registry.py holds each of them to this table (an entry's key is bound to its action, its palette title is
there, its pane and engine module exist, its CLI commands are parsed).

Adding a job kind is one entry below plus its runner (measure/runners.py says the params each takes), its wording
and, where it has them, its pane and its command. The app and the CLI send a kind the same params; what one front end
does not show (a note on stderr) comes back to both, as Progress("note"), which the app leaves out.

No torch, no Textual, nothing imported: a runner is named as "package.module:function" and imported only when a job
of its kind comes, in the measurement process.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable


@dataclass(frozen=True)
class JobKind:
    """One kind of job.

    `runner`: "package.module:function" taking (params, JobContext) and returning (result, extra). `measures`: it
    runs alone on the machine (sending one cancels every other that measures). `commands`: the CLI commands that
    send it. `keys`: the app's keys that start it, as Textual names them; `palette`: their titles in the command
    palette; `action`: the app's action those keys and entries run, one per key. `pane`: the app's pane that owns
    its jobs (app/screens/main.py PANES); `engine`: the short name of the torch-free engine module the app needs to
    start it or show its result (app/session.py ENGINE_MODULES)."""

    name: str
    runner: str
    measures: bool = False
    commands: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    palette: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    pane: str | None = None
    engine: str | None = None


RUNNERS = "torchperf_tui.measure.runners"
GENERATION = "torchperf_tui.measure.generation_runners"

KINDS: dict[str, JobKind] = {kind.name: kind for kind in (
    JobKind("time", f"{RUNNERS}:timing_job", measures=True, commands=("bench", "compare", "roofline"),
            keys=("r",), palette=("Run timing",), actions=("pane('timing', 'start_run')",), pane="timing",
            engine="timing"),
    JobKind("ab", f"{RUNNERS}:ab_job", measures=True, commands=("compare",), keys=("a",),
            palette=("A/B comparison",), actions=("compare_ab",), pane="compare", engine="abtest"),
    JobKind("kernels", f"{RUNNERS}:kernels_job", measures=True, commands=("compare",), keys=("k",),
            palette=("Kernels per conv layer",), actions=("kernels",), pane="kernels", engine="kernels"),
    JobKind("determinism", f"{RUNNERS}:determinism_job", measures=True, commands=("determinism",), keys=("d",),
            palette=("Determinism check",), actions=("pane('timing', 'check_determinism')",), pane="timing",
            engine="determinism"),
    JobKind("modes", f"{RUNNERS}:modes_job", measures=True, commands=("bench",), keys=("M",),
            palette=("Timing modes",), actions=("pane('timing', 'start_modes')",), pane="timing", engine="timing"),
    JobKind("layer_times", f"{RUNNERS}:layer_times_job", measures=True, commands=("roofline",), keys=("l",),
            palette=("Time per layer",), actions=("pane('layers', 'time_layers')",), pane="layers",
            engine="roofline"),
    JobKind("ceilings", f"{RUNNERS}:ceilings_job", measures=True, commands=("ceilings",), keys=("C",),
            palette=("Measure ceilings",), actions=("pane('device', 'measure_ceilings')",), pane="device"),
    JobKind("memsnap", f"{RUNNERS}:memsnap_job", measures=True, commands=("memsnap",), keys=("n",),
            palette=("Memory snapshot",), actions=("pane('memory', 'snapshot')",), pane="memory", engine="memsnap"),
    JobKind("generate", f"{GENERATION}:generate_job", measures=True, commands=("bench",), keys=("g",),
            palette=("Generate",), actions=("pane('generation', 'start')",), pane="generation", engine="timing"),
    JobKind("generate_ab", f"{GENERATION}:generate_ab_job", measures=True, commands=("compare",)),
    JobKind("slo", f"{RUNNERS}:slo_job", measures=True, commands=("throughput",), pane="throughput",
            engine="throughput"),
    JobKind("throughput", f"{RUNNERS}:throughput_job", measures=True, commands=("throughput",), keys=("t",),
            palette=("Find max batch",), actions=("pane('throughput', 'start')",), pane="throughput",
            engine="throughput"),
    JobKind("sweep", f"{RUNNERS}:sweep_job", measures=True, commands=("sweep",), keys=("w", "W"),
            palette=("Sweep sequence lengths", "Sweep A/B"),
            actions=("pane('sweep', 'start')", "pane('sweep', 'start_ab')"), pane="sweep", engine="sweep"),
    JobKind("profile", f"{RUNNERS}:profile_job", measures=True, commands=("profile",), keys=("p",),
            palette=("Profile",), actions=("pane('profile', 'start')",), pane="profile", engine="profiling"),
    JobKind("why", f"{RUNNERS}:why_job", measures=True, commands=("why",), keys=("y",), palette=("Why",),
            actions=("pane('why', 'start')",), pane="why", engine="advice_result"),
    JobKind("collectives", f"{RUNNERS}:collectives_job", measures=True, commands=("collectives",), keys=("L",),
            palette=("Collectives",), actions=("pane('device', 'run_collectives')",), pane="device",
            engine="collectives"),
    JobKind("ddp", f"{RUNNERS}:ddp_job", measures=True, commands=("ddp",)),
    JobKind("roofline", f"{RUNNERS}:roofline_job", commands=("roofline",), pane="timing", engine="roofline"),
    JobKind("analyse", f"{RUNNERS}:analyse_job", commands=("flops",), pane="picker", engine="complexity_result"),
    JobKind("ceilings_kept", f"{RUNNERS}:ceilings_kept_job", commands=("roofline",), pane="device"),
    JobKind("release", f"{RUNNERS}:release_job", keys=("e",), palette=("Release memory",),
            actions=("pane('memory', 'release')",), pane="memory"),
    JobKind("memory", f"{RUNNERS}:memory_job", pane="memory"),
    JobKind("probe", f"{RUNNERS}:probe_job", pane="device", engine="device"),
    JobKind("catalogue", f"{RUNNERS}:catalogue_job", pane="picker", engine="model_entry"),
)}


def measuring_kinds() -> frozenset[str]:
    """The kinds that measure: one of them at a time on the machine."""
    return frozenset(kind.name for kind in KINDS.values() if kind.measures)


def runner_of(kind: str) -> Callable[..., tuple[Any, dict]] | None:
    """The function that runs jobs of `kind`, its module imported now (in the measurement process); None for a kind
    that is not in the table."""
    entry = KINDS.get(kind)
    if entry is None:
        return None
    module, _, name = entry.runner.partition(":")
    return getattr(import_module(module), name)
