"""Float32 precision as flags: TF32 per backend (the flag table's entries with `fp32_precision`) and the float32
matmul precision. How they are applied and read back (engine/measurements/flags.py calls these: it stays the one
place global torch state is changed), on a torch with per-backend fp32 precision settings and on one without.

Per backend (torch.backends.cuda.matmul, .cudnn.conv, .cudnn.rnn, .mkldnn.matmul, .mkldnn.conv, .mkldnn.rnn, each an
`fp32_precision`): "ieee" (full float32), "tf32", "bf16" (oneDNN's only; CUDA's refuse it), or "none", which inherits:
an operation's setting from its backend's (torch.backends.cudnn.fp32_precision is CUDA's: matmuls, convolutions and
RNNs), that from torch's own (torch.backends.fp32_precision). A getter says the value a setting resolves to, so "none"
only where nothing above it is set. cuDNN's convolutions and RNNs start at TF32 (a default that yields to a parent
and that no setter can name again); everything else at "none". torch.backends.mkldnn.fp32_precision reads oneDNN's
parent but writes torch's own, every backend's: it is never written here.

torch.set_float32_matmul_precision sets CUDA's and oneDNN's matmul settings (highest: ieee and ieee, high: tf32 and
tf32, medium: tf32 and bf16) and a float32 matmul precision of its own that the legacy getters check against them:
torch.get_float32_matmul_precision, torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 raise
("a mix of the legacy and new APIs") once the per-backend settings were set where that precision cannot say them,
and torch's compiler still asks torch.get_float32_matmul_precision while autotuning. So a matmul precision or TF32
matmul is set through that setter, which keeps the two in step (TF32 matmul at 'highest': 'high', oneDNN's matmul
back to ieee, as allow_tf32 did), and only when the settings change; nothing here reads a legacy getter, and every
other TF32 flag is written through fp32_precision only. A setting is written only where its value must change, so a
set of flags at torch's defaults leaves torch's state as it found it; one written is put back as it read, "none"
where inheriting reads so (cuDNN's default, TF32 that yields to a parent, is put back as the value it read).

A torch without per-backend settings: TF32 matmul and cuDNN's TF32 are the allow_tf32 attributes (cuDNN's holds its
convolutions and RNNs as one), the precision torch.set_float32_matmul_precision's, oneDNN's TF32 absent.

No torch at import: the CLI's process and the app's UI process load engine/measurements/flags.py.
"""

from __future__ import annotations

import functools
from typing import Any

from torchperf_tui.core.attention_settings import DEFAULT_MATMUL_PRECISION, allows_tf32
from torchperf_tui.core.flag_table import FLAG_ENTRIES, FlagEntry

TF32, IEEE, INHERIT = "tf32", "ieee", "none"
CUDA_MATMUL, ONEDNN_MATMUL = "backends.cuda.matmul", "backends.mkldnn.matmul"
# oneDNN's matmul setting at each float32 matmul precision (as torch.set_float32_matmul_precision sets it), and back.
_ONEDNN_AT = {"highest": IEEE, "high": TF32, "medium": "bf16"}
_PRECISION_OF = {IEEE: "highest", INHERIT: "highest", TF32: "high", "bf16": "medium"}
# Every setting a flag holds, and those above them, parents first: torch's own (every backend's parent), CUDA's
# (torch.backends.cudnn.fp32_precision), then each operation's. oneDNN's parent is not among them: its setter writes
# torch's own, and nothing here or in a model's code can set it apart.
SETTINGS: tuple[str, ...] = ("backends", "backends.cudnn", *dict.fromkeys(
    (CUDA_MATMUL, ONEDNN_MATMUL, *(path for entry in FLAG_ENTRIES for path in entry.fp32_precision))))
ONEDNN_PARENT = "backends.mkldnn"  # read only
# torch's own float32 matmul precision, kept with the settings it must agree with (never read from torch: see
# _legacy_precision).
LEGACY_PRECISION = "float32_matmul_precision"
# The settings this process has written (torch.set_float32_matmul_precision writes the two matmul ones): only these
# can hold a value of ours where the value read is the one to put back, "tf32" given where it was inherited.
_WRITTEN: set[str] = set()
_PRECISION_SET = False  # whether this process has called torch.set_float32_matmul_precision
# The settings of the flags on by default, cuDNN's convolutions and RNNs: they start at torch's own default, TF32 that
# yields to a parent, not at "none" (which would read off with no parent set). No setter takes that default: one
# written is put back as the value it read, which it behaves as until a parent is set.
_START_AT_TF32 = {path for entry in FLAG_ENTRIES if entry.fp32_precision and entry.default
                  for path in entry.fp32_precision}


def _torch():
    import torch  # the CLI's process and the app's UI process load this module without torch

    return torch


def _holder(path: str) -> Any:
    """'backends.cudnn.rnn' -> torch.backends.cudnn.rnn, or None where this torch has no such object."""
    try:
        return functools.reduce(getattr, path.split("."), _torch())
    except AttributeError:
        return None


def per_backend() -> bool:
    """Whether this torch keeps fp32 precision per backend: every setting the flags hold has its `fp32_precision`
    (found on the objects themselves, not from the version)."""
    return all(hasattr(_holder(path), "fp32_precision") for path in (*SETTINGS, ONEDNN_PARENT))


def read(path: str) -> str:
    return str(getattr(_holder(path), "fp32_precision"))


def _write(path: str, value: str) -> None:
    _WRITTEN.add(path)
    setattr(_holder(path), "fp32_precision", value)


def _switch(path: str, on: bool) -> None:
    """TF32 on or off for one setting, written only where it reads otherwise ("none" reads off: nothing above it
    is set)."""
    now = read(path)
    if (now == TF32) if on else (now in (IEEE, INHERIT)):
        return
    _write(path, TF32 if on else IEEE)


# -- the TF32 flags ----------------------------------------------------------------------------------------------

def tf32_on(entry: FlagEntry) -> bool:
    """Whether a TF32 flag is on: each of its settings reads "tf32"; without them, its allow_tf32 (off where it
    has none)."""
    if per_backend():
        return all(read(path) == TF32 for path in entry.fp32_precision)
    if not entry.allow_tf32:
        return False
    *owner, name = entry.allow_tf32.split(".")
    return bool(getattr(_holder(".".join(owner)), name))


def apply_tf32(entry: FlagEntry, on: bool) -> None:
    """Set a TF32 flag: each of its settings, or without them its allow_tf32 where it holds the flag alone (one that
    needs per-backend settings, TF32 RNN, follows TF32 cuDNN there)."""
    if per_backend():
        for path in entry.fp32_precision:
            _switch(path, on)
    elif entry.allow_tf32 and "fp32_precision" not in entry.needs:
        *owner, name = entry.allow_tf32.split(".")
        setattr(_holder(".".join(owner)), name, on)


# -- float32 matmul precision, with TF32 matmul ------------------------------------------------------------------

def current_matmul_precision() -> str:
    """torch's float32 matmul precision: what oneDNN's matmul setting says where torch keeps one per backend ("none",
    torch's start: highest; CUDA's says TF32 matmul), else torch.get_float32_matmul_precision."""
    if per_backend():
        return _PRECISION_OF.get(read(ONEDNN_MATMUL), DEFAULT_MATMUL_PRECISION)
    try:
        return _torch().get_float32_matmul_precision()
    except RuntimeError:  # an older torch's mixed state: its precision cannot be told
        return DEFAULT_MATMUL_PRECISION


def apply_matmul_precision(precision: str, tf32_matmul: bool) -> None:
    """Set the precision and TF32 matmul (on at 'high' and 'medium', which torch ties it to). Where torch keeps the
    settings per backend, only when CUDA's or oneDNN's matmul setting must change, through
    torch.set_float32_matmul_precision so that its own precision agrees with them (see the module's words)."""
    torch = _torch()
    if not per_backend():
        torch.set_float32_matmul_precision(precision)
        if not allows_tf32(precision):
            torch.backends.cuda.matmul.allow_tf32 = tf32_matmul
        return
    cuda_tf32 = tf32_matmul or allows_tf32(precision)
    onednn = _ONEDNN_AT[precision]
    now_onednn = read(ONEDNN_MATMUL)
    if (read(CUDA_MATMUL) == TF32) == cuda_tf32 and (now_onednn == onednn or {now_onednn, onednn} <= {IEEE, INHERIT}):
        return
    _set_legacy_precision("high" if cuda_tf32 and precision == "highest" else precision)
    if read(ONEDNN_MATMUL) != onednn:  # 'highest' with TF32 matmul: 'high' for cuBLAS, oneDNN's back to ieee
        _write(ONEDNN_MATMUL, onednn)


def _set_legacy_precision(precision: str) -> None:
    """torch.set_float32_matmul_precision: its own precision, and CUDA's and oneDNN's matmul settings with it."""
    global _PRECISION_SET
    _WRITTEN.update((CUDA_MATMUL, ONEDNN_MATMUL))
    _PRECISION_SET = True
    _torch().set_float32_matmul_precision(precision)


def _legacy_precision() -> str:
    """The float32 matmul precision torch's legacy getters hold, as the matmul settings say it (a legacy getter raises
    where they disagree, and warns on some versions). Where both read as their backend's parent does, they inherit:
    set_float32_matmul_precision, which sets both, has not set them, and it is torch's start, 'highest'; else the
    precision they say (CUDA's TF32 alone: 'high', as allow_tf32 and TF32 matmul at 'highest' set it)."""
    cuda, onednn = read(CUDA_MATMUL), read(ONEDNN_MATMUL)
    if cuda == read("backends.cudnn") and onednn == read(ONEDNN_PARENT):
        return DEFAULT_MATMUL_PRECISION
    if onednn in (TF32, "bf16"):
        return _PRECISION_OF[onednn]
    return "high" if cuda == TF32 else DEFAULT_MATMUL_PRECISION


# -- the settings as found, and put back -------------------------------------------------------------------------

def settings() -> tuple[tuple[str, str], ...]:
    """torch's float32 matmul precision as the settings say it, then every per-backend setting as its getter reads
    it, parents first; () on a torch without them."""
    if not per_backend():
        return ()
    return ((LEGACY_PRECISION, _legacy_precision()), *((path, read(path)) for path in SETTINGS))


def restore(saved: tuple[tuple[str, str], ...]) -> None:
    """Put back the settings `saved` read, parents first, after the flags (and with them torch's float32 matmul
    precision) were put back. One that reads otherwise, or that this process has written, is set to "none" (inherit)
    where that reads as it did, else to the value: a getter says what a setting resolves to, so inheriting is kept
    wherever it gives that value (cuDNN's two: the value, see _START_AT_TF32). One never written that reads as it did
    is left as it is. torch's float32 matmul precision first, where this process has set it."""
    for path, value in saved:
        if path == LEGACY_PRECISION:
            if _PRECISION_SET:  # it writes the two matmul settings, put back below
                _set_legacy_precision(value)
            continue
        if path not in _WRITTEN and read(path) == value:
            continue
        if path not in _START_AT_TF32:
            _write(path, INHERIT)
        if read(path) != value:
            _write(path, value)


def cpu_has_tf32() -> bool | None:
    """Whether torch lets oneDNN compute float32 in TF32 on this CPU: it checks for AMX-FP16 first. None where this
    torch cannot say."""
    probe = getattr(_torch().cpu, "_is_amx_fp16_supported", None)
    return None if probe is None else bool(probe())
