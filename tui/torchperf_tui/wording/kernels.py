"""The kernels each conv layer ran under A and under B (engine.analysis.kernels.KernelComparison) in words: the
CLI's heading and table of `compare --kernels`, and the facts the kernels pane says too (what was profiled, how many
layers changed, a layer's time, what it ran: a list for the CLI, its longest kernel for the pane). The attention
call sites beside them: the kernel each ran against the backends allowed, and each fallback with its reason."""

from __future__ import annotations

from torchperf_tui.core.marks import disturbance_marks
from torchperf_tui.engine.hardware.host_noise import noise_marks
from torchperf_tui.wording import subject
from torchperf_tui.wording.conditions import CONDITION_MARK, disturbed_text
from torchperf_tui.wording.kernel_names import short_kernel_names


def what_ran(result) -> str:
    """'GPU kernels', or on the CPU 'ATen conv implementation' ('ATen implementation' for attention alone)."""
    if result.kind == "cuda-kernel":
        return "GPU kernels"
    return "ATen implementation" if getattr(result, "attention", None) and not result.layers else \
        "ATen conv implementation"


def changed_text(result) -> str:
    """'3 of 20 conv layers changed what they ran'."""
    return f"{len(result.changed_layers)} of {len(result.layers)} conv layers changed what they ran"


def us_text(us: float) -> str:
    """A time per iteration in µs: '1,234'."""
    return f"{us:,.0f}"


def disturbed_arms(result) -> set[str]:
    """The arms ("A", "B") whose profiled passes were disturbed: the app saw something beside them (both), or the
    host was busy over that arm's passes (the arms run one after the other)."""
    hosts = getattr(result, "arm_hosts", {})
    return {arm for arm in ("A", "B") if getattr(result, "app_marks", None) or noise_marks(hosts.get(arm))}


def arm_us_text(us: float, arm: str, disturbed: set[str]) -> str:
    """An arm's time per iteration, marked '1,234 !' where that arm is among the `disturbed` (disturbed_arms: the
    line of marks under, or above, the table says what the mark is)."""
    return us_text(us) + (f" {CONDITION_MARK}" if arm in disturbed else "")


def kernels_marks_text(result, compact: bool = False) -> str:
    """'! disturbed: arm A: noisy host' where an arm's times are marked ('' when none; `compact`: the marks'
    heads, the pane's line above its table)."""
    text = disturbed_text(disturbance_marks(result), compact)
    return f"{CONDITION_MARK} {text}" if text and disturbed_arms(result) else text


def shows_step(result) -> bool:
    """Whether the step is said: a training step, or under autocast (plain inference goes without saying)."""
    return bool(result.training or getattr(result, "amp", None))


def ran_text(kernels, names: dict[str, str], compact: bool = False) -> str:
    """What a layer ran (each kernel by its short name in `names`): the CLI's up to three with their µs, one a line
    (one alone: its time is the layer's); `compact`: the pane's longest kernel and how many more ran."""
    if not kernels:
        return "–" if compact else "(nothing recorded)"
    if compact:
        return names[kernels[0].name] + (f" +{len(kernels) - 1}" if len(kernels) > 1 else "")
    if len(kernels) == 1:
        return names[kernels[0].name]
    return "\n".join(f"{names[k.name]} {us_text(k.us_per_iter)} us" for k in kernels[:3]) + (
        f"\n+{len(kernels) - 3} more" if len(kernels) > 3 else "")


def kernels_title(result) -> str:
    """The CLI's heading: the model, input and step, what was profiled, per conv layer (and pass)."""
    step = f", each iteration {result.step}" if shows_step(result) else ""
    per = "per conv layer" if result.layers or not getattr(result, "attention", None) else "per attention call site"
    return (f"{subject(result, dtype=False)}{step}: {what_ran(result)} "
            f"{per}{' and pass' if result.training else ''}, per iteration ({result.iters} profiled)")


def layer_rows(result, width: int):
    """(the layer, its name on its first row else '', the pass, its part, the kernels' short names in `width`): a
    row per conv layer, per pass (fwd, dgrad, wgrad, bwd) of a training step's."""
    for layer in result.layers:
        for index, (phase, part) in enumerate(layer.phases() if result.training else [("", layer)]):
            names = short_kernel_names([k.name for k in [*part.a, *part.b]], width)
            yield layer, layer.layer if index == 0 else "", phase, part, names


def kernel_cells(result) -> list[tuple[str, ...]]:
    """The CLI's table: (layer, [pass,] what A ran, what B ran or 'same', A us, B us, 'changed' or '')."""
    disturbed = disturbed_arms(result)
    return [(name, *([phase] if result.training else []), ran_text(part.a, names),
             ran_text(part.b, names) if part.changed else "same", arm_us_text(part.a_us, "A", disturbed),
             arm_us_text(part.b_us, "B", disturbed), "changed" if part.changed else "")
            for _, name, phase, part, names in layer_rows(result, 36)]


# -- attention: the kernel each SDPA call site ran (engine.analysis.attention_kernels.AttentionSite) ---------------

# transformers' attention implementations other than SDPA, as a site that ran one is named
OTHER_IMPLEMENTATIONS = {"eager": "eager (matmul + softmax)", "flex_attention": "flex_attention (compiled)",
                         "flash_attention_2": "flash_attention_2 (flash-attn)"}
KERNEL_WORDS = {"flash": "flash", "efficient": "efficient", "cudnn": "cuDNN", "math": "math", **OTHER_IMPLEMENTATIONS}
_BACKEND_WORDS = {"flash": "flash", "efficient": "efficient", "cudnn": "cuDNN", "math": "math"}


def kernel_word(ran: str) -> str:
    """'flash', 'math (bmm + softmax)'; '–' when nothing was recorded."""
    if not ran:
        return "–"
    return " + ".join("math (bmm + softmax)" if part == "math" else KERNEL_WORDS.get(part, part)
                      for part in ran.split("+"))


def attention_ran_text(run, compact: bool = False) -> str:
    """What an arm's attention ran at a site beside what it allowed: 'math (bmm + softmax), allowed math'; the
    pane's compact 'math' (its status line says what each arm allowed), with '*' where it passed one over."""
    if compact:
        return (run.ran or "–") + ("*" if run.passed_over else "")
    if run.ran in OTHER_IMPLEMENTATIONS:  # no SDPA call: what SDPA allowed does not apply
        return f"{kernel_word(run.ran)}, no SDPA call"
    return f"{kernel_word(run.ran)}, allowed {run.allowed}"


def attention_changed_text(result) -> str:
    """'2 of 2 attention sites changed kernel'."""
    sites = list(dict.fromkeys(site.site for site in result.attention))
    changed = list(dict.fromkeys(site.site for site in result.attention if site.changed))
    return f"{len(changed)} of {len(sites)} attention site{'s' if len(sites) != 1 else ''} changed kernel"


def _and_more(sites: list[str]) -> str:
    return sites[0] if len(sites) == 1 else f"{sites[0]} and {len(sites) - 1} more site{'s' if len(sites) > 2 else ''}"


def fallback_lines(result) -> list[str]:
    """Each fallback in words, per arm and pass, its sites gathered: 'B: flash allowed, math ran at
    model.layers.0.self_attn and 1 more site: dropout'."""
    said: dict[tuple, list[str]] = {}
    for site in result.attention:
        for arm, run in (("A", site.a), ("B", site.b)):
            if not run.passed_over or not run.ran:
                continue
            reasons = list(dict.fromkeys(run.passed_over.values()))
            names = " and ".join(_BACKEND_WORDS.get(b, b) for b in run.passed_over)
            why = reasons[0] if len(reasons) == 1 else "; ".join(
                f"{_BACKEND_WORDS.get(b, b)}: {r}" for b, r in run.passed_over.items())
            pass_text = " (backward)" if site.phase == "bwd" else ""
            key = (arm, names, run.ran, pass_text, why)
            said.setdefault(key, []).append(site.site)
    return [f"{arm}: {names} allowed, {kernel_word(ran).split(' (')[0]} ran{pass_text} at {_and_more(sites)}: {why}"
            for (arm, names, ran, pass_text, why), sites in said.items()]


def attention_cells(result) -> list[tuple[str, ...]]:
    """The CLI's attention table: (site, [pass,] what A ran and allowed, what B ran and allowed, A us, B us,
    'changed' or '')."""
    rows = []
    disturbed = disturbed_arms(result)
    for index, site in enumerate(result.attention):
        first = index == 0 or result.attention[index - 1].site != site.site
        rows.append((site.site if first or not result.training else "", *([site.phase] if result.training else []),
                     attention_ran_text(site.a), attention_ran_text(site.b),
                     arm_us_text(site.a.us_per_iter, "A", disturbed), arm_us_text(site.b.us_per_iter, "B", disturbed),
                     "changed" if site.changed else ""))
    return rows


def attention_title(result) -> str:
    """The heading of the attention table."""
    per = " and pass" if result.training else ""
    return (f"Attention: the kernel each attention site{per} ran, beside the SDPA backends its arm allowed, µs per "
            f"iteration")


def kernels_summary(result) -> str:
    """The pane's line above its table: what changed among the conv layers and the attention sites, and what the
    table shows."""
    parts = ([changed_text(result)] if result.layers else []) + (
        [attention_changed_text(result)] if getattr(result, "attention", None) else [])
    per = " per pass" if result.training else ""
    return f"{' · '.join(parts) or 'nothing profiled'} · {what_ran(result)}{per}, µs per iteration over {result.iters} profiled"
