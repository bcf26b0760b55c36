"""A refusal that says what to change names the CLI's option on the command line and the app's field in the app:
the engine says which setting and what value (engine.errors.Remedy), wording/refusals.py words it for each front."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest

from torchperf_tui.core.errors import ModelError, ModelTooLarge, Remedy, ShapeError, user_message
from torchperf_tui.wording.refusals import app_message, refusal_text, said_in_app

TOO_LARGE = ModelTooLarge("hf:llama: 6.74 B parameters are 25.1 GiB in float32; the CPU has 11.2 GiB free",
                          remedies=(Remedy("model_args", "num_hidden_layers=2", "for fewer layers"),
                                    Remedy("dtype", "bfloat16", "for half the bytes")))


def test_the_cli_names_the_options_and_the_app_names_its_fields():
    assert str(TOO_LARGE) == ("hf:llama: 6.74 B parameters are 25.1 GiB in float32; the CPU has 11.2 GiB free; give "
                              "--model-args num_hidden_layers=2 for fewer layers, or --dtype bfloat16 for half the bytes")
    assert refusal_text(TOO_LARGE.refusal, TOO_LARGE.remedies, front="cli") == str(TOO_LARGE)
    app = app_message(TOO_LARGE)
    assert app == ("hf:llama: 6.74 B parameters are 25.1 GiB in float32; the CPU has 11.2 GiB free; give "
                   "num_hidden_layers=2 in the args field (sidebar, under the model list) for fewer layers, or bfloat16 "
                   "in the dtype list (sidebar, under args) for half the bytes")
    assert "--" not in app


def test_each_action_has_its_verb_in_each_front():
    custom = ModelError("pkg.mod:build is built by its own factory: model arguments are for torchvision, timm: and "
                        "hf: models", remedies=(Remedy("model_args", action="clear"),))
    assert str(custom).endswith("hf: models; leave out --model-args")
    assert app_message(custom).endswith("hf: models; clear the args field (sidebar, under the model list)")
    dtype = ModelError("hf:gpt2: dtype is not a model argument", remedies=(Remedy("dtype", action="use"),))
    assert str(dtype) == "hf:gpt2: dtype is not a model argument; use --dtype"
    assert app_message(dtype) == "hf:gpt2: dtype is not a model argument; use the dtype list (sidebar, under args)"
    smaller = ModelTooLarge("resnet18: too large", remedies=(Remedy(None, "a smaller model"),))
    assert str(smaller) == app_message(smaller) == "resnet18: too large; give a smaller model"


def test_a_setting_the_app_has_no_field_for_is_left_out_of_its_sentence():
    from torchperf_tui.engine.measurements.generation import check_positions

    inputs = SimpleNamespace(seq_len=10, max_len=16, max_len_key="max_position_embeddings")
    with pytest.raises(ShapeError) as caught:
        check_positions(inputs, 8)
    assert str(caught.value) == ("a 10-token prompt and 8 new tokens need 17 positions, past the model's maximum of 16 "
                                 "(max_position_embeddings); give --prompt-len 9 or less, or --generate 7 or fewer")
    assert app_message(caught.value) == (
        "a 10-token prompt and 8 new tokens need 17 positions, past the model's maximum of 16 "
        "(max_position_embeddings); give 9 or less in the seq field (sidebar, beside args: the prompt's length)")
    inputs = SimpleNamespace(seq_len=16, max_len=16, max_len_key="")
    with pytest.raises(ShapeError) as caught:  # the prompt alone fills every position: no count of new tokens fits
        check_positions(inputs, 8)
    assert str(caught.value).endswith("maximum of 16; give --prompt-len 9 or less")


def test_a_job_error_without_remedies_is_said_as_it_came_and_a_refusal_survives_pickling():
    assert said_in_app("resnet18 has no keyword argument 'x'") == "resnet18 has no keyword argument 'x'"
    assert said_in_app(str(TOO_LARGE), TOO_LARGE.refusal, TOO_LARGE.remedies) == app_message(TOO_LARGE)
    copy = pickle.loads(pickle.dumps(TOO_LARGE))
    assert (str(copy), copy.remedies, type(copy)) == (str(TOO_LARGE), TOO_LARGE.remedies, ModelTooLarge)
    assert user_message(ValueError("bad")) == app_message(ValueError("bad")) == "ValueError: bad"
    with pytest.raises(ValueError, match="front 'web'"):
        refusal_text("x", (), front="web")


def test_the_measurement_process_sends_a_refusal_in_parts_for_the_app():
    """The job's line is the CLI's; its refusal and remedies travel beside it, so the app words them."""
    import queue

    from torchperf_tui.measure.client import MeasurementProcess
    from torchperf_tui.measure.protocol import JobDone, JobFailed

    events: queue.Queue = queue.Queue()
    process = MeasurementProcess(on_event=events.put, output="stderr", restart=False)
    process.start()
    try:
        job = process.submit("analyse", {"model": "tests.tinymodels:tiny_cnn", "model_args": (("width", "2"),),
                                         "batch": 1, "dtype": "float32"}, "analysing")
        while True:
            event = events.get(timeout=120)
            if getattr(event, "job_id", None) == job and isinstance(event, (JobDone, JobFailed)):
                break
    finally:
        process.stop()
    assert isinstance(event, JobFailed) and not event.internal
    assert event.error.endswith("hf: models; leave out --model-args")
    assert event.refusal.endswith("hf: models") and event.remedies == (Remedy("model_args", action="clear"),)
    assert said_in_app(event.error, event.refusal, event.remedies).endswith(
        "; clear the args field (sidebar, under the model list)")
