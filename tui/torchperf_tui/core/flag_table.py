"""The flag table: every backend flag a run can set, described once.

An entry says what the flag is (its name, which is its field of engine/measurements/flags.Flags and its key in a
record; its label, kind, default and choices), where it has an effect (cpu, cuda or any, and what torch must have
for it to act), its help in the sidebar, its command-line options, its SPEC keys, and the attribute of torch that
holds it (for a TF32 flag, the per-backend fp32_precision settings it switches, and the allow_tf32 attribute a torch
without them holds it in). The rest follows from the table by looping over it: Flags' fields, the CLI's options and
the flags they set, the SPEC keys and their aliases, the baseline's overrides and the gate's names, the sidebar's
switches, what a record, MLflow and an export write. A new flag is one entry here (and, where torch holds it in a
way no attribute says, its apply and read functions in engine/measurements/flags.py, the one place that changes
torch's state).

No torch: the CLI's process and the app's UI process read the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torchperf_tui.core.attention_settings import (DEFAULT_MATMUL_PRECISION, MATMUL_PRECISIONS, SDPA_ALL, SDPA_CHOICES,
                                                   parse_matmul_precision, parse_sdpa)
from torchperf_tui.core.errors import FlagError
from torchperf_tui.core.options import thread_count

# How an option takes its value: --x and --no-x; --x alone (on); --x VALUE (the flag's parse); --x CHOICE.
SWITCH, ON, VALUE, CHOICE = "switch", "on", "value", "choice"


@dataclass(frozen=True)
class FlagOption:
    """A command-line option: every flag whose entry names it takes its value (--tf32 sets the three CUDA TF32
    flags)."""

    text: str  # "--cudnn-benchmark"
    help: str
    style: str = VALUE
    default: Any = None  # argparse's value when the option is not typed; None leaves the flags' own default
    metavar: str | None = None

    @property
    def dest(self) -> str:
        """The option's name in argparse's namespace: '--cudnn-benchmark' -> 'cudnn_benchmark'."""
        return self.text.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class FlagEntry:
    """What a flag is, where it acts, and how a user and torch name it."""

    name: str
    label: str  # as the sidebar, the flags' text and the notes say it
    kind: type  # bool, int, or str (one of `choices` in the sidebar; any parsed value in the CLI and a SPEC)
    default: Any  # PyTorch's own; None for the threads: the measurement process's count
    device: str  # "cuda", "cpu" or "any": where the flag has an effect
    help: str  # the sidebar's tooltip
    choices: tuple[str, ...] = ()
    parse: Callable[[str], Any] | None = None  # a value as typed -> the value (an int or str flag's; a SPEC's bools
    #                                            are on/off words, engine/measurements/ab_arms.py)
    option: FlagOption | None = None  # its own option
    shared_option: FlagOption | None = None  # an option that sets it with other flags (--tf32), listed before its
    #                                          own, which wins where both are typed
    keys: tuple[str, ...] = ()  # SPEC keys: the first is the one compare's help names, the others aliases
    key_example: str = ""  # said beside that key in compare's help
    key_in_help: bool = True  # whether compare's help names its key (two flags' keys it has never named)
    listed_after: str = ""  # its option and keys are listed after this flag's (where the CLI has always had them)
    key_said_after: str = ""  # compare's help names its key after this flag's (where it has always named it)
    elsewhere: str = ""  # why it does nothing on the other kind of device (default: said by `device`)
    needs: tuple[str, ...] = ()  # what torch must have for it to act, checked in this order: "cudnn" in the build,
    #                              "tf32" (compute capability 8.0 on CUDA), "onednn" in the build, "fp32_precision"
    #                              (torch's per-backend fp32 precision settings), "cpu_tf32" (a CPU oneDNN may use
    #                              TF32 on)
    torch_attr: str = ""  # the attribute of torch that holds it, set and read as `kind`; where that is not all,
    #                       engine/measurements/flags.py names the flag among its own appliers and readers
    fp32_precision: tuple[str, ...] = ()  # a TF32 flag's: the objects of torch whose fp32_precision it switches
    #                                       between "tf32" (on) and "ieee" (off), e.g. "backends.cudnn.rnn"; it reads
    #                                       on where every one says "tf32" (engine/measurements/precision_flags.py)
    allow_tf32: str = ""  # a TF32 flag's: the attribute a torch without fp32_precision holds it in, read there, and
    #                       set there unless the flag needs "fp32_precision" (it shares the attribute, or has none)
    older: str = ""  # a flag added later: the flag that a record written before it holds (it lacks this one)
    older_value: str = "same"  # how such a record ran this one: "same", at that flag's value (tf32_rnn: the one
    #                            allow_tf32 held cuDNN's RNNs with its convolutions); "default", at this one's default


# --tf32 and SPEC key tf32 set TF32 for CUDA's matmuls, cuDNN's convolutions and cuDNN's RNNs together: the one
# allow_tf32 of cuDNN that they set before held its convolutions and RNNs as one, so --no-tf32 still turns off all
# that it did. oneDNN's TF32 on the CPU is not among them (it never was): --tf32-mkldnn, tf32_mkldnn=on. Each has
# its own option and key besides. tf32_cudnn keeps its name (records, the gate) and is cuDNN's convolutions.
TF32_OPTION = FlagOption("--tf32", "allow TF32 on CUDA for fp32 matmuls, cuDNN convolutions and cuDNN RNNs (default: "
                                   "PyTorch's; --tf32-matmul, --tf32-cudnn, --tf32-rnn set one each)", SWITCH)

FLAG_ENTRIES: tuple[FlagEntry, ...] = (
    FlagEntry("cudnn_benchmark", "cudnn.benchmark", bool, False, "cuda",
             "autotune conv algorithms per input shape (wins on fixed shapes, re-tunes on new ones)",
             option=FlagOption("--cudnn-benchmark", "torch.backends.cudnn.benchmark (default off)", SWITCH,
                               default=False),
             keys=("cudnn_benchmark", "benchmark"), needs=("cudnn",), torch_attr="backends.cudnn.benchmark"),
    FlagEntry("cudnn_deterministic", "cudnn.deterministic", bool, False, "cuda",
             "only deterministic cuDNN conv algorithms",
             option=FlagOption("--deterministic", "torch.backends.cudnn.deterministic", ON),
             keys=("deterministic", "cudnn_deterministic"), needs=("cudnn",),
             torch_attr="backends.cudnn.deterministic"),
    FlagEntry("cudnn_enabled", "cudnn.enabled", bool, True, "cuda",
             "use cuDNN at all (off: PyTorch's native CUDA kernels)",
             keys=("cudnn_enabled",), key_in_help=False, needs=("cudnn",), torch_attr="backends.cudnn.enabled"),
    FlagEntry("tf32_matmul", "TF32 matmul", bool, False, "cuda",
             "allow TF32 tensor cores for fp32 matmuls (cuBLAS; Ampere and newer)",
             option=FlagOption("--tf32-matmul", "TF32 for fp32 matmuls on CUDA "
                                                "(torch.backends.cuda.matmul.fp32_precision; default off)", SWITCH),
             shared_option=TF32_OPTION, keys=("tf32", "tf32_matmul"), needs=("tf32",),
             fp32_precision=("backends.cuda.matmul",), allow_tf32="backends.cuda.matmul.allow_tf32"),
    FlagEntry("tf32_cudnn", "TF32 cuDNN", bool, True, "cuda",
             "allow TF32 tensor cores for fp32 cuDNN convolutions (Ampere and newer)",
             option=FlagOption("--tf32-cudnn", "TF32 for fp32 cuDNN convolutions "
                                               "(torch.backends.cudnn.conv.fp32_precision; default on)", SWITCH),
             shared_option=TF32_OPTION, keys=("tf32", "tf32_cudnn"), needs=("cudnn", "tf32"),
             fp32_precision=("backends.cudnn.conv",), allow_tf32="backends.cudnn.allow_tf32"),
    FlagEntry("tf32_rnn", "TF32 RNN", bool, True, "cuda",
             "allow TF32 tensor cores for fp32 cuDNN RNNs (LSTM, GRU; Ampere and newer)",
             option=FlagOption("--tf32-rnn", "TF32 for fp32 cuDNN RNNs (torch.backends.cudnn.rnn.fp32_precision; "
                                             "default on)", SWITCH),
             shared_option=TF32_OPTION, keys=("tf32", "tf32_rnn"), needs=("cudnn", "tf32", "fp32_precision"),
             fp32_precision=("backends.cudnn.rnn",), allow_tf32="backends.cudnn.allow_tf32", older="tf32_cudnn"),
    FlagEntry("deterministic_algorithms", "deterministic algos", bool, False, "any",
             "torch.use_deterministic_algorithms: error on ops with no deterministic version",
             option=FlagOption("--deterministic-algorithms", "torch.use_deterministic_algorithms(True)", ON),
             keys=("deterministic_algorithms",), key_in_help=False, listed_after="cudnn_deterministic"),
    FlagEntry("mkldnn_enabled", "oneDNN (mkldnn)", bool, True, "cpu",
             "use oneDNN kernels for CPU convolutions and matmuls",
             keys=("mkldnn",), key_said_after="num_threads", elsewhere="oneDNN runs CPU ops only",
             needs=("onednn",), torch_attr="backends.mkldnn.enabled"),
    # oneDNN's matmuls are not this flag's: torch ties their precision to set_float32_matmul_precision (matmul_precision
    # high: TF32, medium: bfloat16), and torch's mkldnn.fp32_precision, the parent of all three, sets every backend's.
    FlagEntry("tf32_mkldnn", "TF32 oneDNN", bool, False, "cpu",
             "allow TF32 in oneDNN's fp32 convolutions and RNNs on the CPU: torch uses it only on a CPU with "
             "AMX-FP16; oneDNN's matmuls follow matmul precision (high: TF32)",
             option=FlagOption("--tf32-mkldnn", "TF32 for oneDNN's fp32 convolutions and RNNs on a CPU with AMX-FP16 "
                                                "(torch.backends.mkldnn.conv and .rnn fp32_precision; default off)",
                               SWITCH),
             keys=("tf32_mkldnn",), key_said_after="mkldnn_enabled", elsewhere="oneDNN runs CPU ops only",
             needs=("onednn", "fp32_precision", "cpu_tf32"),
             fp32_precision=("backends.mkldnn.conv", "backends.mkldnn.rnn"), older="tf32_cudnn",
             older_value="default"),
    FlagEntry("num_threads", "threads", int, None, "cpu",
             "intra-op CPU threads (torch.set_num_threads); empty: the measurement process's own count",
             parse=thread_count,
             option=FlagOption("--threads", "CPU intra-op threads (torch.set_num_threads), at most the machine's "
                                            "logical CPUs"),
             keys=("threads",), elsewhere="sets CPU threads; the model runs on the GPU"),
    FlagEntry("sdpa", "sdpa", str, SDPA_ALL, "any",
             "the backends scaled_dot_product_attention may choose from (sdpa_kernel): flash, efficient, cudnn, "
             "math, joined with +; all: PyTorch's choice. The CPU has flash and math", SDPA_CHOICES,
             parse=parse_sdpa,
             option=FlagOption("--sdpa", "the backends scaled_dot_product_attention may use, joined with +: flash, "
                                         "efficient, cudnn, math, e.g. flash+math (default all; the CPU has flash "
                                         "and math)", metavar="BACKENDS"),
             keys=("sdpa",), key_example="sdpa=flash+math"),
    FlagEntry("matmul_precision", "matmul", str, DEFAULT_MATMUL_PRECISION, "any",
             "torch.set_float32_matmul_precision: highest (full fp32), high (TF32 on CUDA), medium (bf16 passes too)",
             MATMUL_PRECISIONS, parse=parse_matmul_precision,
             option=FlagOption("--matmul-precision", "torch.set_float32_matmul_precision: highest (default), high "
                                                     "(TF32 on CUDA), medium", CHOICE),
             keys=("matmul_precision",), needs=("tf32",)),
)

_BY_NAME = {entry.name: entry for entry in FLAG_ENTRIES}
# Why a flag of one kind of device does nothing on the other, unless its entry says.
_ELSEWHERE = {"cuda": "a CUDA setting: no effect on the CPU", "cpu": "a CPU setting: no effect on the GPU"}
# What an entry's `needs` may name (engine/measurements/flags.py checks each).
NEEDS = ("cudnn", "tf32", "onednn", "fp32_precision", "cpu_tf32")


def options_of(entry: FlagEntry) -> tuple[FlagOption, ...]:
    """The command-line options that set the flag: the one it shares with others first, then its own."""
    return tuple(option for option in (entry.shared_option, entry.option) if option is not None)


def _faults() -> list[str]:
    """What an entry lacks for the CLI, a SPEC, the sidebar and the guard to take it, a line each."""
    faults = [f"{name}: two entries" for name in _BY_NAME if [s.name for s in FLAG_ENTRIES].count(name) > 1]
    for entry in FLAG_ENTRIES:
        if entry.kind not in (bool, int, str):
            faults.append(f"{entry.name}: a flag is a bool, an int or a str")
        if entry.kind is not bool and entry.parse is None:
            faults.append(f"{entry.name}: a value other than on/off needs its parse (as typed -> the value)")
        if entry.kind is str and not entry.choices:
            faults.append(f"{entry.name}: a text flag needs its choices (the sidebar's select)")
        if entry.device not in ("cuda", "cpu", "any"):
            faults.append(f"{entry.name}: device is cuda, cpu or any")
        faults += [f"{entry.name}: needs {need!r} is none of {', '.join(NEEDS)}" for need in entry.needs
                   if need not in NEEDS]
        faults += [f"{entry.name}: {after} names no flag" for after in (entry.listed_after, entry.key_said_after)
                   if after and after not in _BY_NAME]
        for option in options_of(entry):
            if option.style in (SWITCH, ON) and entry.kind is not bool:
                faults.append(f"{entry.name}: {option.text} is a switch, for an on/off flag")
            if option.style == ON and entry.default is not False:
                faults.append(f"{entry.name}: {option.text} typed alone turns it on, so it is off by default")
            if option.style == CHOICE and not entry.choices:
                faults.append(f"{entry.name}: {option.text} takes one of the flag's choices, and it has none")
        if entry.fp32_precision and (entry.kind is not bool or entry.torch_attr):
            faults.append(f"{entry.name}: a TF32 flag (fp32_precision) is on/off, held by those settings alone")
        if entry.older and (entry.older not in _BY_NAME or entry.older_value not in ("same", "default")):
            faults.append(f"{entry.name}: older names the flag an older record holds; older_value is same or default")
        if entry.allow_tf32 and not entry.fp32_precision:
            faults.append(f"{entry.name}: allow_tf32 is where an older torch holds a TF32 flag (fp32_precision)")
    for text, spec_kinds in _kinds_by(lambda entry: [option.text for option in options_of(entry)]).items():
        if len(spec_kinds) > 1:
            faults.append(f"{text} sets flags of different kinds")
    for key, spec_kinds in _kinds_by(lambda entry: entry.keys).items():
        if len(spec_kinds) > 1:
            faults.append(f"SPEC key {key} sets flags of different kinds")
    return faults


def _kinds_by(names) -> dict[str, set[type]]:
    """Option text or SPEC key -> the kinds of the flags it sets."""
    found: dict[str, set[type]] = {}
    for entry in FLAG_ENTRIES:
        given = names(entry) or ()
        for name in (given,) if isinstance(given, str) else given:
            found.setdefault(name, set()).add(entry.kind)
    return found


if _faults():  # a new entry says everything its consumers need
    raise TypeError("the flag table: " + "; ".join(_faults()))


def flag_entry(name: str) -> FlagEntry:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise FlagError(f"unknown flag {name!r}: known flags are {', '.join(_BY_NAME)}") from None


def _moved(entries: list[FlagEntry], after: str) -> list[FlagEntry]:
    """`entries` with each entry whose `after` field names a flag moved behind that flag's entry."""
    order = [entry for entry in entries if not getattr(entry, after)]
    for entry in entries:
        if getattr(entry, after):
            order.insert(order.index(_BY_NAME[getattr(entry, after)]) + 1, entry)
    return order


def listed() -> list[FlagEntry]:
    """The entries in the order the CLI lists their options and SPEC keys: the table's, each `listed_after`
    entry moved behind the one it names."""
    return _moved(list(FLAG_ENTRIES), "listed_after")


def flag_options() -> list[tuple[FlagOption, tuple[str, ...]]]:
    """Each command-line option once, in the CLI's order, with the flags it sets. An option shared by several flags
    comes before their own options, so that one typed beside it wins (--no-tf32 --tf32-rnn: TF32 for RNNs alone)."""
    found: dict[str, tuple[FlagOption, tuple[str, ...]]] = {}
    for entry in listed():
        for given in options_of(entry):
            option, names = found.get(given.text, (given, ()))
            found[given.text] = (option, (*names, entry.name))
    return list(found.values())


def spec_keys() -> dict[str, tuple[str, ...]]:
    """SPEC key -> the flags it sets ('tf32' sets the three CUDA TF32 flags; 'benchmark' is an alias of
    'cudnn_benchmark'), in the CLI's order."""
    keys: dict[str, tuple[str, ...]] = {}
    for entry in listed():
        for key in entry.keys:
            keys[key] = (*keys.get(key, ()), entry.name)
    return keys


def spec_keys_text() -> str:
    """The SPEC keys as compare's help names them: each flag's first key once (`key_in_help`, in the CLI's order, a
    `key_said_after` entry behind the one it names), with its example where it has one:
    'cudnn_benchmark, deterministic, tf32, threads, mkldnn, tf32_mkldnn, sdpa (e.g. sdpa=flash+math),
    matmul_precision'."""
    named: dict[str, str] = {}
    for entry in _moved(listed(), "key_said_after"):
        if entry.keys and entry.key_in_help and entry.keys[0] not in named:
            named[entry.keys[0]] = entry.keys[0] + (f" (e.g. {entry.key_example})" if entry.key_example else "")
    return ", ".join(named.values())


def recorded_flags(flags: dict[str, Any]) -> dict[str, Any]:
    """A record's flags as its run had them: where it was written before a flag existed (it holds the flag's `older`,
    not the flag), that flag as `older_value` says (an old record's tf32_cudnn off had cuDNN's RNNs off too)."""
    missing = {entry.name: flags[entry.older] if entry.older_value == "same" else entry.default
               for entry in FLAG_ENTRIES if entry.older in flags and entry.name not in flags}
    return {**flags, **missing} if missing else flags


def gate_name(name: str) -> str:
    """A flag's name in the gate's differences, as the command line says it: its option's where that option sets
    it alone ('threads', 'deterministic'), else its own ('tf32_matmul', 'mkldnn_enabled', a name from a file)."""
    for option, names in flag_options():
        if names == (name,):
            return option.dest
    return name


def device_applicability(name: str, device: str) -> tuple[bool, str | None]:
    """Whether flag `name` is a setting of the kind of device (`"cpu"`/`"cuda"`) at all, and why not: no torch
    needed, so the flags' text can be made in the app's UI process."""
    entry = flag_entry(name)
    on_cuda = device.startswith("cuda")
    if (entry.device == "cuda" and not on_cuda) or (entry.device == "cpu" and on_cuda):
        return False, entry.elsewhere or _ELSEWHERE[entry.device]
    return True, None
