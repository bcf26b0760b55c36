"""transformers models as `hf:TYPE` or `hf:DIRECTORY` (their config: engine/workloads/hf_config.py): the head
(the causal-LM class for decoders, the base model for the rest), a random-weight build in the run's dtype on its
device or on meta, the longest sequence a model takes, and its inputs made from its own input names.

Nothing here reaches the network: models are built with `from_config` (random initialisation, never weights).
Imported only by the measurement process and the CLI (it imports torch).
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING

from torchperf_tui.core.errors import ModelError, Remedy, ShapeError, first_line
from torchperf_tui.engine.workloads.hf_config import (  # noqa: F401 - the config's names, exported with the model's
    INSTALL, PREFIX, auto_mappings, int_setting, is_path, label, layers_key, load_config, model_types, quiet,
    refusal, strip_prefix, text_config, transformers_module,
)
from torchperf_tui.engine.workloads.input_spec import InputSpec, TensorSpec
from torchperf_tui.engine.workloads.inputs import check_dims
from torchperf_tui.core.formatting import format_shape

if TYPE_CHECKING:
    import torch
    from torch import nn

CAUSAL_LM = "causal-lm"
BASE = "base"
DEFAULT_SEQ_LEN = 128

# Raw audio models (wav2vec2, hubert...): one second of samples when the config names no sampling rate.
DEFAULT_SAMPLING_RATE = 16000

# Config keys that bound a token model's sequence length, in the order they are looked for.
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_target_positions", "max_seq_len",
                 "max_sequence_length", "seq_length", "n_ctx")

# Models whose position ids start after the padding index (RoBERTa's scheme): their usable length is
# max_position_embeddings - (pad_token_id + 1).
PADDING_OFFSET_POSITIONS = frozenset({
    "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "data2vec-text", "roberta-prelayernorm", "xmod",
    "longformer", "luke", "mpnet", "ibert", "markuplm", "bridgetower_text_model", "clap_text_model",
})

# The inputs this module can make, by the model's main input name.
MADE_INPUTS = ("input_ids", "pixel_values", "input_features", "input_values")


# --------------------------------------------------------------------------------------------------
# The head and the build


def head(config) -> str:
    """"causal-lm" for a decoder (a type with a causal-LM class that is neither an encoder-decoder nor a masked-LM
    encoder: BERT's family has a causal-LM class too, but is an encoder), "base" for everything else."""
    _, modeling = auto_mappings()
    model_type = config.model_type
    if (model_type in modeling.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
            and model_type not in modeling.MODEL_FOR_MASKED_LM_MAPPING_NAMES
            and not getattr(config, "is_encoder_decoder", False)):
        return CAUSAL_LM
    return BASE


@functools.lru_cache(maxsize=1)
def type_heads() -> dict[str, str]:
    """Every type of model_types() with its head (the catalogue's). Only the types that have a causal-LM class
    need their default config made (to see whether it is an encoder-decoder); a few seconds, once."""
    transformers = transformers_module()
    _, modeling = auto_mappings()
    heads: dict[str, str] = {}
    with quiet():
        for model_type in model_types():
            if (model_type not in modeling.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
                    or model_type in modeling.MODEL_FOR_MASKED_LM_MAPPING_NAMES):
                heads[model_type] = BASE
                continue
            try:
                heads[model_type] = head(transformers.AutoConfig.for_model(model_type))
            except Exception:  # noqa: BLE001 - a type whose default config fails says so when chosen
                heads[model_type] = CAUSAL_LM
    return heads


def _auto_class(config):
    transformers = transformers_module()
    return transformers.AutoModelForCausalLM if head(config) == CAUSAL_LM else transformers.AutoModel


def model_class(config):
    """The class build() makes for `config` (without building it): its main_input_name and forward signature
    say what inputs the model takes."""
    auto = _auto_class(config)
    try:
        found = auto._model_mapping[type(config)]
    except (KeyError, ValueError):
        raise ModelError(f"{label(config)}: transformers has no {auto.__name__} for {type(config).__name__}") from None
    except Exception as exc:  # noqa: BLE001 - its module failing to import (a missing extra: torchaudio)
        raise ModelError(f"{label(config)}: transformers cannot load its model class: {first_line(exc)}") from None
    found = found[0] if isinstance(found, (tuple, list)) else found  # funnel: (FunnelModel, FunnelBaseModel)
    try:
        getattr(found, "main_input_name", None)  # a stand-in class for a missing extra raises here
    except ImportError as exc:
        raise ModelError(f"{label(config)}: transformers cannot load its model class: {first_line(exc)}") from None
    return found


def build(config, dtype: "torch.dtype", device: "str | torch.device" = "cpu", attn: str | None = None) -> "nn.Module":
    """The model of `config` with random weights, in eval mode, built directly in `dtype` on `device` (no float32
    copy first; "meta": the structure without memory), with the attention implementation `attn` (None: the one
    transformers picks); one its class does not support is transformers' refusal, in one line."""
    import torch

    auto = _auto_class(config)
    with quiet(), torch.device(device):
        try:
            # Never the code of a directory's auto_map (transformers would ask on the terminal): its own class.
            chosen = {"attn_implementation": attn} if attn is not None else {}
            model = auto.from_config(config, dtype=dtype, trust_remote_code=False, **chosen)
        except Exception as exc:  # noqa: BLE001 - a config the model code refuses is one line
            why = refusal(exc)
            if attn is not None and "attention implementation" in why:  # its first sentence says it; then links
                raise ModelError(f"attn {attn}: {why.split('. ')[0]} (transformers); its class supports "
                                 "others: try eager or sdpa") from None
            raise ModelError(f"cannot build {label(config)}: {type(exc).__name__}: {why}") from None
    return model.eval()


# --------------------------------------------------------------------------------------------------
# Sequence lengths


def position_limit(config) -> tuple[str, int] | None:
    """(the config key, the longest sequence it allows) for a token model, None where nothing bounds it (T5's
    relative positions). Whisper-style audio models bound their decoder's tokens with max_target_positions."""
    keys = POSITION_KEYS
    if _main_input_name(config) == "input_features":
        keys = ("max_target_positions",) + tuple(k for k in POSITION_KEYS if k != "max_target_positions")
    for source in (config, text_config(config)):
        stored = getattr(source, "__dict__", {})
        # A stored key first (gpt2's n_positions), an alias of it (max_position_embeddings) only where none is.
        for key in sorted(keys, key=lambda k: k not in stored):
            value = int_setting(source, key)
            if value is not None:
                if config.model_type in PADDING_OFFSET_POSITIONS:
                    pad = getattr(source, "pad_token_id", None)
                    value -= (pad if isinstance(pad, int) else 1) + 1
                return key, value
    return None


def max_positions(config) -> int | None:
    """The longest sequence the model takes (position_limit names the config key it comes from)."""
    limit = position_limit(config)
    return limit[1] if limit else None


def default_seq_len(config) -> int:
    """128 tokens, or the model's maximum when that is smaller."""
    limit = max_positions(config)
    return min(DEFAULT_SEQ_LEN, limit) if limit else DEFAULT_SEQ_LEN


def _check_seq_len(config, seq_len: int) -> int:
    limit = position_limit(config)
    if limit is not None and seq_len > limit[1]:
        key, value = limit
        raise ShapeError(f"{label(config)}: sequence length {seq_len} is past the model's maximum positions "
                         f"({key} allows {value})",
                         remedies=(Remedy("seq_len", f"{value} or less"), Remedy("model_args", f"{key}={seq_len}")))
    if seq_len < 1:
        raise ShapeError(f"{label(config)}: sequence length {seq_len} must be at least 1")
    return seq_len


# --------------------------------------------------------------------------------------------------
# Inputs


def _main_input_name(config) -> str:
    return getattr(model_class(config), "main_input_name", "input_ids")


def _forward_params(config) -> set[str]:
    try:
        return set(inspect.signature(model_class(config).forward).parameters)
    except (TypeError, ValueError):
        return set()


def _vocab_size(config) -> int | None:
    for source in (config, text_config(config)):
        value = int_setting(source, "vocab_size")
        if value is not None:
            return value
    return None


def _image_dims(config) -> tuple[int, int, int]:
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", None) or 224
    h, w = (size, size) if isinstance(size, int) else (tuple(size) * 2)[:2]
    return int(getattr(vision, "num_channels", 3) or 3), int(h), int(w)


def _main_dims(config, main: str) -> tuple[int, ...]:
    """The main input's shape without the batch for a model whose main input is not tokens."""
    if main == "pixel_values":
        return _image_dims(config)
    if main == "input_features":
        mels, frames = int_setting(config, "num_mel_bins"), int_setting(config, "max_source_positions")
        if mels and frames:
            return mels, 2 * frames  # Whisper: its encoder's two convolutions halve the frames to its positions
    if main == "input_values":
        mels, length = int_setting(config, "num_mel_bins"), int_setting(config, "max_length")
        if mels and length:
            return length, mels  # an audio spectrogram transformer: (frames, mel bins)
        rate = int_setting(config, "sampling_rate") or DEFAULT_SAMPLING_RATE
        channels = int_setting(config, "audio_channels")
        return (channels, rate) if channels else (rate,)  # one second of raw audio
    if main in MADE_INPUTS:
        raise ModelError(f"{label(config)}: its config does not tell the shape of its {main} (this tool knows "
                         f"Whisper's and raw audio's): give the model as package.module:factory with "
                         f"example_inputs(batch, device, dtype)")
    names = " and ".join(map(repr, main)) if isinstance(main, (list, tuple)) else repr(main)
    raise ModelError(f"{label(config)}'s main input is {names}, which this tool cannot make (it makes "
                     f"{', '.join(MADE_INPUTS[:-1])} and {MADE_INPUTS[-1]}): give the model as package.module:factory "
                     f"with example_inputs(batch, device, dtype)")


def _typed(batch: int, input_shape: tuple | None) -> tuple[int, ...] | None:
    if input_shape is None:
        return None
    return check_dims((batch, *tuple(input_shape)[1:]))


def input_spec(config, *, batch: int, seq_len: int | None, input_shape: tuple | None = None) -> InputSpec:
    """What the model of `config` is fed, from its own input names (the model class's main_input_name and
    forward signature, no build):

    - text (decoders, encoders): input_ids (batch, seq_len) below the vocabulary, an attention_mask of ones beside
      them when forward takes one, and decoder_input_ids of the same length for an encoder-decoder (T5, BART);
    - vision: pixel_values (num_channels, image_size, image_size);
    - Whisper-style audio: input_features (num_mel_bins, 2 x max_source_positions) and decoder_input_ids of
      seq_len tokens; raw audio (wav2vec2): input_values of one second at the config's sampling rate.

    `seq_len` None is default_seq_len; past the model's maximum positions it is a ShapeError naming the key; given
    to a model without token input, a ShapeError saying what it takes. `input_shape` (typed, with the batch)
    replaces the main input's shape.
    """
    main = _main_input_name(config)
    params = _forward_params(config)
    typed = _typed(batch, input_shape)
    vocab = _vocab_size(config)
    encoder_decoder = bool(getattr(config, "is_encoder_decoder", False))
    if main == "input_ids":
        # The sequence length is the explicit knob: it sets the length of a typed shape too (the app's shape field
        # holds the model's default length until one is typed there).
        length = seq_len if seq_len is not None else (typed[-1] if typed is not None else default_seq_len(config))
        _check_seq_len(config, length)
        shape = (*typed[:-1], length) if typed is not None else (batch, length)
        extra = []
        if "attention_mask" in params:
            extra.append(TensorSpec("attention_mask", "mask"))
        if encoder_decoder and "decoder_input_ids" in params:
            extra.append(TensorSpec("decoder_input_ids", "tokens", high=vocab))  # the length of the input's
        limit = position_limit(config)
        return InputSpec(shape, TensorSpec("input_ids", "tokens", high=vocab), tuple(extra),
                         max_len=limit[1] if limit else None, max_len_key=limit[0] if limit else "")
    dims = _main_dims(config, main)
    shape = typed if typed is not None else (batch, *dims)
    extra = []
    if encoder_decoder and "decoder_input_ids" in params:
        length = _check_seq_len(config, seq_len if seq_len is not None else default_seq_len(config))
        extra.append(TensorSpec("decoder_input_ids", "tokens", dims=(length,), high=vocab))
    elif seq_len is not None:
        raise ShapeError(f"{label(config)} takes {main} ({format_shape(dims)}), not token ids: a sequence length "
                         f"does not apply; give an input shape instead")
    return InputSpec(shape, TensorSpec(main, "float"), tuple(extra))
