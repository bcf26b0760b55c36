"""The app's keys and its command-palette entries, as data. A job's key names the pane that owns the job and
the method that starts it (`pane('timing', 'start_run')`): the App only hands it over."""

from __future__ import annotations

from textual.binding import Binding

from torchperf_tui.app.screens.layout import TABS

BINDINGS = [
    Binding("r", "pane('timing', 'start_run')", "Run"),
    Binding("c", "cancel_run", "Cancel"),
    # The screen's, here for its place in the footer. A priority key, run as it is read: the name typed after it, which
    # over SSH arrives in the same read, then goes to the filter and not to the list (where r would run a model). The
    # screen lets it through to a text field that has the cursor (MainScreen.check_action).
    Binding("slash", "screen.focus_filter", "Model", priority=True),
    Binding("h", "screen.toggle_sidebar", "Sidebar", show=False),
    # Help and Quit before the rest: a narrow footer cuts from the right.
    Binding("question_mark", "help", "Help"),
    Binding("q", "quit", "Quit"),
    Binding("e", "pane('memory', 'release')", "Free mem"),
    Binding("s", "screenshot", "Shot"),
    Binding("b", "baseline", "Baseline", show=False),  # History: the gate's baseline; elsewhere Compare's
    Binding("x", "pane('compare', 'clear_runs')", "Clear runs", show=False),
    Binding("t", "pane('throughput', 'start')", "Max batch", show=False),
    Binding("T", "pane('throughput', 'focus_slo')", "Latency budget", show=False),
    Binding("p", "pane('profile', 'start')", "Profile", show=False),
    Binding("o", "pane('profile', 'cycle_sort')", "Sort ops", show=False),
    Binding("m", "mark_history_run", "Mark run", show=False),
    Binding("a", "compare_ab", "A/B", show=False),
    Binding("k", "kernels", "Kernels", show=False),
    Binding("d", "pane('timing', 'check_determinism')", "Determinism", show=False),
    Binding("M", "pane('timing', 'start_modes')", "Timing modes", show=False),
    Binding("C", "pane('device', 'measure_ceilings')", "Ceilings", show=False),
    Binding("L", "pane('device', 'run_collectives')", "Collectives", show=False),
    Binding("l", "pane('layers', 'time_layers')", "Layer times", show=False),
    Binding("n", "pane('memory', 'snapshot')", "Mem snapshot", show=False),
    Binding("w", "pane('sweep', 'start')", "Sweep lengths", show=False),
    Binding("W", "pane('sweep', 'start_ab')", "Sweep A/B", show=False),
    Binding("g", "pane('generation', 'start')", "Generate", show=False),
    Binding("y", "pane('why', 'start')", "Why", show=False),
]

# (title, help, action) for the command palette
PALETTE = [
    ("Run timing", "Time the chosen model with the current flags", "pane('timing', 'start_run')"),
    ("Cancel run", "Cancel the measurement in flight", "cancel_run"),
    ("Release memory", "gc + empty_cache / malloc_trim, and show what was freed", "pane('memory', 'release')"),
    ("Save screenshot", "Save an SVG screenshot of the screen", "screenshot"),
    ("Set baseline", "Make the run highlighted in Compare the baseline", "pane('compare', 'set_baseline')"),
    ("Mark the gate's baseline", "History: the highlighted record becomes the baseline each timing run is shown "
     "against (again: unmarked)", "baseline"),
    ("Clear runs", "Forget the kept runs", "pane('compare', 'clear_runs')"),
    ("Find max batch", "Largest batch that fits, and samples/s there", "pane('throughput', 'start')"),
    ("Profile", "torch.profiler top operators and a Chrome trace", "pane('profile', 'start')"),
    ("Sort profile", "Sort the profiled operators by the next key", "pane('profile', 'cycle_sort')"),
    ("A/B comparison", "The flags before the last flip against the current ones, interleaved, with a verdict",
     "compare_ab"),
    ("Kernels per conv layer", "What each conv layer ran before and after the last flip", "kernels"),
    ("Determinism check", "The same input twice under the current flags", "pane('timing', 'check_determinism')"),
    ("Timing modes", "Sync, pipelined and CUDA-graph timing side by side, and what the gaps mean",
     "pane('timing', 'start_modes')"),
    ("Measure ceilings", "Device: the best of several matmuls and convolutions per dtype, a large copy and, on a "
     "GPU, the host-device transfers, kept; roofline, MFU and a run's input copy use them",
     "pane('device', 'measure_ceilings')"),
    ("Collectives", "Device: all_reduce, all_gather and reduce_scatter across the GPUs (NCCL), or across processes on "
     "the CPU (gloo): time, algbw and busbw per message size against the link's peak, and busbw plotted",
     "pane('device', 'run_collectives')"),
    ("Time per layer", "Layers: profile the last run's model again and give each layer its time and share of the "
     "pass (on a GPU: busy and idle)", "pane('layers', 'time_layers')"),
    ("Memory snapshot", "CUDA: the allocator's history for pytorch.org/memory_viz", "pane('memory', 'snapshot')"),
    ("Sweep sequence lengths", "A token model's latency and memory at lengths doubling from 128 to 4096",
     "pane('sweep', 'start')"),
    ("Sweep A/B", "The flags before the last flip against the current ones at each length, curves overlaid",
     "pane('sweep', 'start_ab')"),
    ("Generate", "Causal LMs: greedy generation with the model's KV cache; time to first token and per output token",
     "pane('generation', 'start')"),
    ("Why", "What costs this set-up its time: findings ranked, the top three fixes measured as A/Bs",
     "pane('why', 'start')"),
    ("Mark history run", "History: mark the highlighted run; two marked are compared", "mark_history_run"),
    ("Filter models", "Type to filter the model list", "screen.focus_filter"),
    ("Flags", "Move to the flag switches", "screen.focus_flags"),
    ("Show or hide the sidebar", "More room for the tabs on a narrow terminal", "screen.toggle_sidebar"),
    ("Help", "Keys and a short guide", "help"),
    *[(f"Show {name.title()}", f"Switch to the {name} tab", f"screen.show_tab('{name}')") for name in TABS],
]
