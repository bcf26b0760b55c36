"""The help screen (`?`): the keys and what the panes show."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Markdown

HELP = """\
# torchperf-tui

How fast a PyTorch model runs on this box, and why.

| key | action |
| --- | --- |
| `/` | filter the model list (type, `↓` to the list, `⏎` to choose) |
| `r` | start a timing run (cancels the one in flight; pressed while the app starts, it waits for the engine) |
| `c` | cancel the run, search or profile in flight |
| `f` | go to the flags; flipping one restarts the run (or, with *on flip: A/B*, compares old and new) |
| `a` | A/B: the flags before the last flip against the current ones, interleaved, with a verdict |
| `k` | the kernels each conv layer ran before and after the last flip (Kernels) |
| `d` | determinism check: the same input twice under the current flags, bitwise equal or not (step train: two training steps from the same state, gradients and updated weights compared) |
| `M` | timing modes: the model synchronised per iteration, pipelined (back to back) and replayed as a CUDA graph, side by side, with what the gaps mean (launch-bound or not) |
| `l` | time per layer (Layers tab): the last run's model profiled again; each layer's own time, share of the pass and achieved FLOP/s, longest first, what no layer owns, and on a GPU how much of the pass it sat idle |
| `C` | measured ceilings (Device tab): per dtype the best of several matmuls and 3x3 convolutions (and, on the CPU, thread counts), and a large copy, and on a GPU the host-to-device and device-to-host transfers from pinned and pageable memory, kept per device; roofline, MFU and a run's input copy then use them, and a utilisation above one says the ceiling is too low |
| `L` | collectives (Device tab): all_reduce, all_gather and reduce_scatter over a few message sizes across the box's GPUs (NCCL) where it has two or more, else across two processes on the CPU (gloo); per size the time, algbw and busbw as nccl-tests defines them, busbw's share of the link's peak, and busbw against message size plotted, a curve per collective (`torchperf-tui collectives` for other sizes) |
| `n` | CUDA: a memory snapshot of a few iterations, for pytorch.org/memory_viz |
| `g` | generation (causal LMs, Timing tab): greedy, the model's own KV cache, 64 new tokens after the input as the prompt; time to first token, per-token latency (a live histogram), tokens/s, the cache's size |
| `y` | why (Why tab): what costs this set-up its time, findings ranked by the time at stake per pass with their evidence and the fix to paste, the top three fixes measured as interleaved A/Bs (confirmed, refuted, inconclusive or not run), within 2 minutes |
| `1`–`9` | Timing, Compare, Layers, Device, Memory, Throughput, Profile, History, Kernels tabs (Sweep: `w`, Why: `y`) |
| `h` | hide or show the sidebar (the tabs get the full width; below 70 columns it starts hidden) |
| `b` | (Compare) make the highlighted run the baseline; (History) mark the highlighted record as the baseline: each timing run after it is shown against it in Timing (ratio of medians with its 95 % CI, faster / slower / the same, what differs, as `compare --baseline` says it); `b` again unmarks it |
| `t` | the batch with the most samples/s and the largest that fits (Throughput) |
| `T` | (Throughput) type a latency budget (`p99=50ms` ⏎): the largest batch within it and the frontier |
| `w` | (Sweep) a token model's p50 latency, tokens/s and peak memory at lengths 128, 256, ... 4096 (cut at its maximum positions), until one does not fit or 120 s; `W` the flags before the last flip (A) against the current ones (B), interleaved, both curves overlaid |
| `p` | profile a few iterations: top operators and a Chrome trace (Profile) |
| `o` | (Profile) sort the operators by the next key; or press a column header |
| `m` / `⏎` | (History) mark a run; with two marked, see how they compare |
| `]` / `[` | (History) older / newer page of runs |
| `v` | (History) the change points of the highlighted run's set-up over the whole history, as `history --changes` says them; `v` again hides them |
| `x` | forget all kept runs |
| `e` | release memory (gc, `empty_cache` / `malloc_trim`) |
| `s` | save an SVG screenshot |
| `tab` / `shift+tab` | move between controls (`space` flips a switch, `⏎` opens a selector) |
| `ctrl+p` | command palette |
| `esc` | leave a text field |
| `q` | quit (in this help: `esc`, `q` or `?` closes it) |

**Timing**: a first iteration (one-off costs), the warm-up, then timed iterations; the histogram
fills as samples arrive. Every run uses exactly one set of flags.

**Run options** (under the flags): *step*, an inference pass or a training step (forward, loss,
backward, SGD-momentum or AdamW step), and *amp*, mixed precision by torch.autocast (not a cast of the
model); every measurement takes both; *iters* (64 by default, enough for p90's 95 % interval: a `?`
marks a percentile the samples cannot support, and a run stops at a 60 s budget) and *warm-up* (a count,
or `auto` until the iteration time settles; ⏎ takes a value); *shapes* fixed, `cycle:4` or `random` (a new input size each
iteration: cudnn.benchmark re-tunes for every new shape, and those first-seen iterations are drawn
apart with their tuning cost); *graph* eager or `torch.compile` (compile time reported apart);
*on flip* a new run or an interleaved A/B.

**Compare**: the last runs, their median and p99, and the speed-up of each over the baseline
(baseline median / run median); up to four finished runs are overlaid, one colour each. An A/B
runs both flag sets in alternating blocks in one process, so drift hits both alike, and says
whether B differs from A beyond noise (Wilcoxon on paired blocks, bootstrap 95 % CI).

**Roofline** (under the timing stats): achieved TFLOP/s, MFU (n/a on a CPU: no peak is known),
arithmetic intensity and whether the model sits on the memory or the compute side.

**Kernels**: per conv layer, the GPU kernels cuDNN picked under each flag set (on a CPU, the
ATen convolution implementation: kernel choice is a GPU view).

**Memory**: NVML's used memory is what the driver sees; the allocator's *reserved* minus
*allocated* is memory this process caches but no tensor uses; `e` gives it back, and the chart
marks the instant with what was freed. During a run the allocator is sampled every iteration.

**MLflow**: started as `torchperf-tui --mlflow URI` (`sqlite:///path/mlflow.db` or a tracking server
`http://HOST:PORT`; `pip install 'torchperf-tui[mlflow]'`), every finished timing, A/B, generation,
throughput search and sweep is logged as an MLflow run: its set-up as parameters, its statistics as
metrics, the environment as tags, the samples as `samples.json`. A store that cannot be used is said
once when the app starts, and the app runs on without it.
"""


class HelpScreen(ModalScreen[None]):
    """Keys and a short guide; any of esc, q, ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Markdown(HELP)
        yield Footer()  # its own, over the main screen's: the keys that work here, not the ones that do not

    def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
