"""The config of an `hf:` model: `hf:TYPE` (transformers' default config of every type it can build from a config
alone) or `hf:DIRECTORY` (a local folder's config.json, read offline), with the user's overrides checked against
the settings the config really has (a config takes any keyword silently: a typo must not pass as a setting) and
applied. engine/workloads/hf_models.py builds the model and makes its inputs; nothing here reaches the network.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import json
import os
import stat
from typing import Any, Iterator

from torchperf_tui.core.errors import ModelError, Remedy, first_line
from torchperf_tui.engine.workloads.model_args import ModelArgs, check_keys, coerce

PREFIX = "hf:"
INSTALL = "pip install transformers"

# Settings the config carries that are not the model's: set elsewhere (the dtype) or meaningless here.
# A config.json is a few kilobytes (a large label map: a megabyte); past this it is no config, and is not read.
MAX_CONFIG_BYTES = 16 * 1024 * 1024

NOT_SETTINGS = frozenset({"dtype", "torch_dtype", "transformers_version", "architectures", "model_type",
                          "_name_or_path", "auto_map", "_commit_hash", "_attn_implementation_autoset"})
ELSEWHERE = {"dtype": "dtype", "torch_dtype": "dtype"}  # a config key -> the run's own setting for it (a Remedy's)


# --------------------------------------------------------------------------------------------------
# transformers itself


def transformers_module():
    try:
        import transformers
    except ImportError:
        raise ModelError(f"hf: models need transformers, which is not installed: {INSTALL}") from None
    return transformers


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """transformers' warnings about default configs (an eos id past a vocabulary, a decoder used alone) say nothing
    about a measurement: keep them off the user's screen while a config is made or a model built."""
    import warnings

    logging = transformers_module().utils.logging
    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.set_verbosity(level)


def auto_mappings():
    from transformers.models.auto import configuration_auto, modeling_auto

    return configuration_auto, modeling_auto


@functools.lru_cache(maxsize=1)
def _buildable() -> frozenset[str]:
    _, modeling = auto_mappings()
    return frozenset(modeling.MODEL_MAPPING_NAMES) | frozenset(modeling.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def model_types() -> list[str]:
    """Every model type transformers can build from its config alone (with AutoModel or AutoModelForCausalLM),
    sorted. (Its other config types are parts of these: a CLIP's vision tower, a SAM's mask decoder.)"""
    transformers_module()
    configuration, _ = auto_mappings()
    return sorted(t for t in configuration.CONFIG_MAPPING_NAMES if t in _buildable())


def strip_prefix(name: str) -> str:
    name = (name or "").strip()
    return name[len(PREFIX):].strip() if name.lower().startswith(PREFIX) else name


def is_path(name: str) -> bool:
    """A directory rather than a type: it has a path separator or starts like a path (a folder named like a type
    in the current directory is ./llama)."""
    return os.sep in name or "/" in name or name.startswith((".", "~"))


def label(config_or_name: Any) -> str:
    """'hf:llama' (a type) or 'hf:path/to/dir' (a directory), for messages."""
    if isinstance(config_or_name, str):
        return PREFIX + strip_prefix(config_or_name)
    path = getattr(config_or_name, "_torchperf_path", None)
    return PREFIX + (path or config_or_name.model_type)


# --------------------------------------------------------------------------------------------------
# The config and its overrides


def _accepted_keys(config) -> set[str]:
    """What a config really has: its constructor's named settings, what it stores, and its aliases
    (attribute_map: gpt2's num_hidden_layers for n_layer). A config takes any keyword silently, so this set is
    what tells a setting from a typo."""
    keys: set[str] = set()
    for cls in type(config).__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        for name, param in inspect.signature(init).parameters.items():
            if name != "self" and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                keys.add(name)
    keys.update(k for k in config.to_dict() if not k.startswith("_"))
    keys.update(getattr(config, "attribute_map", {}) or {})
    return {k for k in keys if k not in NOT_SETTINGS}


def _parsed_overrides(owner: str, config, args: ModelArgs) -> dict[str, Any]:
    for key, _ in args:
        if key in ELSEWHERE:
            raise ModelError(f"{owner}: {key} is not a model argument", remedies=(Remedy(ELSEWHERE[key], action="use"),))
    check_keys(owner, args, _accepted_keys(config))
    aliases = getattr(config, "attribute_map", {}) or {}
    values: dict[str, Any] = {}
    for key, text in args:
        default = getattr(config, key, None)
        value = coerce(owner, key, text, default)
        values[aliases.get(key, key)] = value  # the stored name: a directory's config.json holds n_layer, not both
    return values


def load_config(name: str, model_args: ModelArgs = ()):
    """`hf:TYPE` or `hf:DIRECTORY` (the prefix optional) -> its PretrainedConfig with the overrides applied.

    A TYPE's config is transformers' default for it (full size: llama's is 6.7 B parameters); a DIRECTORY's is
    its config.json, read with local_files_only (never the hub). Each override's key is checked against what the
    config has, and its value parsed against the setting's default; the config is then made again with them, so
    the settings derived from them (head_dim from hidden_size) follow.
    """
    transformers = transformers_module()
    name = strip_prefix(name)
    if not name:
        raise ModelError("hf: needs a model type or a directory with a config.json, e.g. hf:llama")
    if is_path(name):
        return _load_directory(transformers, name, model_args)
    configuration, _ = auto_mappings()
    model_type = name if name in configuration.CONFIG_MAPPING_NAMES else name.lower()
    if model_type not in configuration.CONFIG_MAPPING_NAMES:
        close = difflib.get_close_matches(model_type, model_types(), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see `models --source hf`"
        raise ModelError(f"unknown transformers model type {name!r}{hint}")
    if model_type not in _buildable():
        raise ModelError(f"{PREFIX}{model_type} is a part of other models: transformers has no AutoModel or "
                         f"AutoModelForCausalLM for it alone")
    owner = PREFIX + model_type
    with quiet():
        try:
            config = transformers.AutoConfig.for_model(model_type)
        except Exception as exc:  # noqa: BLE001 - a config transformers cannot make is one line
            raise ModelError(f"{owner}: transformers cannot make its default config: {refusal(exc)}") from None
        if not model_args:
            return config
        values = _parsed_overrides(owner, config, model_args)
        try:
            config = transformers.AutoConfig.for_model(model_type, **values)
        except Exception as exc:  # noqa: BLE001 - settings the config refuses (heads not dividing the width)
            raise ModelError(f"{owner}: the config refuses these settings: {refusal(exc)}") from None
    _check_token_ids(owner, config)
    return config


def _check_token_ids(owner: str, config) -> None:
    """A padding id the embedding cannot hold (a vocabulary made smaller than the default's ids, a negative id) is
    one line here, not an assertion from inside the model's build."""
    text = text_config(config)
    vocab = int_setting(text, "vocab_size")
    pad = getattr(text, "pad_token_id", None)
    if vocab and isinstance(pad, int) and not 0 <= pad < vocab:
        fix = "give pad_token_id=0" + (" too (or a larger vocab_size)" if pad >= vocab else "")
        raise ModelError(f"{owner}: pad_token_id {pad} is not a token id of its vocabulary: it must be between 0 and "
                         f"{vocab - 1} (vocab_size {vocab} - 1); {fix}")


def refusal(exc: BaseException) -> str:
    """Why transformers (or huggingface_hub under it) refused a config or a build, whole and in one line: the
    exception's first line, or where that line only announces the reason ("Class validation error for validator
    'validate_architecture':", a strict dataclass's), the reason itself: its cause's, else the lines that follow."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        if not lines:
            return type(exc).__name__
        if not lines[0].endswith(":"):
            return lines[0]
        cause = exc.__cause__ or exc.__context__
        if cause is None:
            return " ".join(lines)
        exc = cause
    return first_line(exc)


_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # POSIX: opening a FIFO must not wait for a writer
_SPECIAL = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _refuse_special(owner: str, path: str, mode: int) -> None:
    """ModelError unless `mode` is a regular file's: a FIFO blocks its reader, /dev/zero never ends."""
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _SPECIAL if test(mode)), "not a file")
    link = f" (a link to {os.readlink(path)})" if os.path.islink(path) else ""
    raise ModelError(f"{owner}: its config.json is {kind}{link}, not a regular file")


def read_config_json(owner: str, folder: str) -> dict[str, Any]:
    """A directory's config.json as a dict, read only if it is a regular file of at most MAX_CONFIG_BYTES (a link to
    one is followed): checked by name first, then on the descriptor, opened without blocking, so a FIFO or a device
    is refused, never read or waited on. Every way it is not a config is one line."""
    path = os.path.join(folder, "config.json")
    try:
        _refuse_special(owner, path, os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise ModelError(f"{owner}: its config.json is a link to {os.readlink(path)}, which does not exist") from None
        raise ModelError(f"{owner}: the directory has no config.json") from None
    except OSError as exc:
        raise ModelError(f"{owner}: cannot read its config.json: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        _refuse_special(owner, path, info.st_mode)
        if info.st_size > MAX_CONFIG_BYTES:
            raise ModelError(f"{owner}: its config.json is {info.st_size:,} bytes, too large for a config (at most "
                             f"{MAX_CONFIG_BYTES // 2**20} MiB)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ModelError(f"{owner}: cannot read its config.json: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:  # it grew while read
        raise ModelError(f"{owner}: its config.json is too large for a config (at most {MAX_CONFIG_BYTES // 2**20} MiB)")
    if not data.strip():
        raise ModelError(f"{owner}: its config.json is empty")
    def not_a_number(word: str):  # JSON has no NaN or Infinity, Python's json reads them: a setting is finite
        raise ModelError(f"{owner}: its config.json holds {word}, not a finite number")

    try:
        values = json.loads(data.decode("utf-8"), parse_constant=not_a_number)
    except UnicodeDecodeError:
        raise ModelError(f"{owner}: its config.json is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{owner}: its config.json is not valid JSON: {exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}") from None
    except RecursionError:
        raise ModelError(f"{owner}: its config.json is not valid JSON: nested too deep") from None
    if not isinstance(values, dict):
        raise ModelError(f"{owner}: its config.json holds a JSON {type(values).__name__}, not the object of settings "
                         f"a config is")
    return values


def _config_class(owner: str, values: dict[str, Any]):
    """The config class of a directory's config.json: its model_type's in transformers. A config whose type only
    the folder's own code (auto_map) defines is refused in one line: that code is never run (transformers would
    ask on the terminal whether to run it)."""
    configuration, _ = auto_mappings()
    model_type = values.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelError(f"{owner}: its config.json names no model_type (transformers' type of the model, e.g. "
                         f"\"llama\")")
    if model_type not in configuration.CONFIG_MAPPING_NAMES:
        if values.get("auto_map"):
            raise ModelError(f"{owner}: its config.json asks for the folder's own code (auto_map) for model type "
                             f"{model_type!r}, which transformers does not know; this tool never runs a model's code "
                             f"from its folder: give the model as package.module:factory")
        close = difflib.get_close_matches(model_type, model_types(), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ModelError(f"{owner}: transformers does not know its model type {model_type!r}{hint}")
    return configuration.CONFIG_MAPPING[model_type]


def _load_directory(transformers, path: str, model_args: ModelArgs):
    """A directory's config.json, read once here (read_config_json) and made into its config class with from_dict,
    as AutoConfig.from_pretrained does once it has the file's dict: nothing else of the folder is read, no code of
    it imported, the hub never asked."""
    owner = PREFIX + path
    folder = os.path.expanduser(path)
    if not os.path.isdir(folder):
        raise ModelError(f"{owner}: no such directory (hf: takes a model type, or a local directory with a "
                         f"config.json)")
    values = read_config_json(owner, folder)
    with quiet():
        config_class = _config_class(owner, values)
        try:
            config = config_class.from_dict(values)
        except Exception as exc:  # noqa: BLE001 - a config.json transformers cannot read is one line
            raise ModelError(f"{owner}: transformers refuses its config.json: {refusal(exc)}") from None
        if getattr(config, "model_type", None) not in _buildable():
            raise ModelError(f"{owner}: transformers has no AutoModel or AutoModelForCausalLM for its model type "
                             f"{getattr(config, 'model_type', None)!r}")
        if model_args:
            values = _parsed_overrides(owner, config, model_args)
            try:
                config = type(config).from_dict({**config.to_dict(), **values})
            except Exception as exc:  # noqa: BLE001
                raise ModelError(f"{owner}: the config refuses these settings: {refusal(exc)}") from None
    config._torchperf_path = path  # for messages: the model is named as the user gave it
    _check_token_ids(owner, config)
    return config




def text_config(config):
    getter = getattr(config, "get_text_config", None)
    if getter is None:
        return config
    try:
        return getter(decoder=True)
    except TypeError:
        return getter()


def int_setting(config, key: str) -> int | None:
    value = getattr(config, key, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def layers_key(config) -> str | None:
    """The setting that sets the number of layers (for the hint of a model too large), None when unknown."""
    accepted = _accepted_keys(config)
    for key in ("num_hidden_layers", "num_layers", "n_layer", "n_layers"):
        if key in accepted:
            return key
    return None
