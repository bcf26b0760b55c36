"""Models from every source through one door (engine/workloads/models.py): torchvision names, timm:NAME, hf:TYPE,
a user's module:factory; their entries, builds, inputs, footprint, the refusal of what cannot fit, the catalogue."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

pytest.importorskip("timm")
pytest.importorskip("transformers")

from tests.one_line import one_line_error
from torchperf_tui.core.errors import ModelError, ModelTooLarge, ShapeError
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.engine.workloads.models import build_model, input_spec_for, list_models, resolve_model, source_of
from torchperf_tui.engine.workloads.model_fit import check_fits, model_footprint

GiB = 2 ** 30
TINY_LLAMA = parse_model_args("num_hidden_layers=2,hidden_size=32,intermediate_size=64,num_attention_heads=4,"
                              "vocab_size=97")


@pytest.mark.parametrize("spec, source", [("resnet18", "torchvision"), ("ResNet18", "torchvision"),
                                          ("timm:resnet18", "timm"), ("TIMM:resnet18", "timm"),
                                          ("hf:llama", "hf"), ("hf:./my_model", "hf"),
                                          ("mypkg.models:build", "custom")])
def test_the_source_is_told_by_the_prefix_and_an_unprefixed_name_stays_torchvision(spec, source):
    assert source_of(spec) == source


def test_entries_carry_their_source_task_and_default_input():
    assert resolve_model("resnet18").source == "torchvision"
    timm = resolve_model("timm:resnet18")
    assert (timm.name, timm.task, timm.input_shape, timm.source) == ("timm:resnet18", "classification",
                                                                     (3, 224, 224), "timm")
    llama = resolve_model("hf:llama", TINY_LLAMA)
    assert (llama.name, llama.task, llama.input_shape, llama.source) == ("hf:llama", "causal-lm", (128,), "hf")
    vit = resolve_model("hf:vit")
    assert (vit.task, vit.input_shape) == ("base", (3, 224, 224))


@pytest.mark.parametrize("spec, message", [
    ("hff:llama", "unknown model source 'hff:' (and no module of that name): did you mean hf:?"),
    ("hf:lama", "unknown transformers model type 'lama'; did you mean llama"),
    ("timm:resnt18", "unknown timm model 'resnt18'; did you mean resnet18"),
    ("llama", "unknown model 'llama'; did you mean hf:llama"),
    ("convnext_atto", "did you mean timm:convnext_atto"),
])
def test_a_bad_spec_is_one_line_with_the_closest_names(spec, message):
    assert message in one_line_error(ModelError, resolve_model, spec)


def test_model_args_go_to_each_source_checked():
    model = build_model("resnet18", model_args=parse_model_args("num_classes=10"))
    assert model.fc.out_features == 10
    with pytest.raises(ModelError, match="resnet18 has no keyword argument 'num_class'; did you mean num_classes"):
        build_model("resnet18", "meta", model_args=parse_model_args("num_class=10"))
    with pytest.raises(ModelError, match="num_classes=0: it must be at least 1"):
        resolve_model("resnet18", parse_model_args("num_classes=0"))
    assert build_model("timm:resnet18", "meta", model_args=parse_model_args("num_classes=7")).fc.out_features == 7
    llama = build_model("hf:llama", model_args=TINY_LLAMA, dtype=torch.bfloat16)
    assert llama.config.num_hidden_layers == 2 and next(llama.parameters()).dtype == torch.bfloat16
    with pytest.raises(ModelError, match="built by its own factory"):
        build_model("mypkg.models:build", model_args=parse_model_args("width=2"))


def test_torchvision_and_timm_take_the_dtype_asked_for():
    assert next(build_model("timm:resnet18", "meta", dtype=torch.float16).parameters()).dtype == torch.float16
    assert next(build_model("resnet18", "meta", dtype=torch.bfloat16).parameters()).dtype == torch.bfloat16


def test_input_specs_serve_every_source():
    assert input_spec_for("resnet18", batch=4).shape == (4, 3, 224, 224)
    assert input_spec_for("timm:inception_v3", batch=2).shape == (2, 3, 299, 299)
    assert input_spec_for("timm:vit_tiny_patch16_224", batch=1,
                          model_args=parse_model_args("img_size=64")).shape == (1, 3, 64, 64)
    llama = input_spec_for("hf:llama", batch=2, seq_len=32, model_args=TINY_LLAMA)
    assert [t.name for t, _ in llama.shapes()] == ["input_ids", "attention_mask"] and llama.shape == (2, 32)
    assert llama.main.high == 97
    with pytest.raises(ShapeError, match="resnet18 takes an image-like tensor"):
        input_spec_for("resnet18", batch=1, seq_len=64)
    with pytest.raises(ShapeError, match="max_position_embeddings allows 2048"):
        input_spec_for("hf:llama", batch=1, seq_len=4096, model_args=TINY_LLAMA)


def test_a_factory_with_example_inputs_makes_them(tmp_path, monkeypatch):
    (tmp_path / "src_factory_mod.py").write_text(textwrap.dedent("""
        import torch
        def build():
            return torch.nn.Linear(4, 2)
        build.example_inputs = lambda batch, device, dtype: {"input": torch.zeros(batch, 4, device=device, dtype=dtype)}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        spec = input_spec_for("src_factory_mod:build", batch=3)
        assert spec.factory == "src_factory_mod:build" and spec.batch == 3
        assert spec.make().kwargs["input"].shape == (3, 4)
        with pytest.raises(ShapeError, match="makes its own inputs"):
            input_spec_for("src_factory_mod:build", batch=1, seq_len=8)
    finally:
        sys.modules.pop("src_factory_mod", None)


@pytest.mark.parametrize("spec, model_args", [("hf:llama", TINY_LLAMA), ("timm:convnext_atto", ()),
                                              ("resnet18", ())])
def test_every_source_builds_runs_and_feeds_bfloat16_only_to_float_inputs(spec, model_args):
    model = build_model(spec, model_args=model_args, dtype=torch.bfloat16)
    inputs = input_spec_for(spec, batch=1, seq_len=8 if spec.startswith("hf:") else None,
                            input_shape=None if spec.startswith("hf:") else (1, 3, 64, 64),
                            model_args=model_args).make(dtype=torch.bfloat16)
    for t in inputs.tensors():
        assert t.dtype == (torch.int64 if spec.startswith("hf:") else torch.bfloat16)
    with torch.no_grad():
        out = inputs.call(model)
    logits = out.logits if spec.startswith("hf:") else out
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()


def test_the_footprint_of_default_llama_comes_from_meta_in_seconds():
    count, nbytes = model_footprint("hf:llama")
    assert count == 6_738_415_616 and nbytes >= count * 4  # float32 weights, plus its rotary buffer
    count16, nbytes16 = model_footprint("hf:llama", dtype=torch.bfloat16)
    assert count16 == count and nbytes16 < nbytes // 2 + 2 ** 20
    assert model_footprint("resnet18") == (11_689_512, 11_689_512 * 4 + 9_600 * 4 + 20 * 8)  # BN stats, counters


def test_a_model_that_cannot_fit_is_refused_in_one_line_before_any_allocation():
    asked = []

    def free(device):
        asked.append(device.type)
        return int(11.2 * GiB)

    with pytest.raises(ModelTooLarge) as info:
        check_fits("hf:llama", (), torch.float32, "cpu", free_bytes=free)
    assert str(info.value) == ("hf:llama: 6.74 B parameters are 25.1 GiB in float32; the CPU has 11.2 GiB free; "
                               "give --model-args num_hidden_layers=2 for fewer layers, or --dtype bfloat16 for half "
                               "the bytes")
    assert isinstance(info.value, ModelError) and asked == ["cpu"]
    check_fits("hf:llama", TINY_LLAMA, torch.float32, "cpu", free_bytes=free)  # a tiny one fits
    check_fits("hf:llama", (), torch.float32, "cpu", free_bytes=lambda device: None)  # unknown: not refused
    # torchvision builds in float32 before any cast: --dtype would not help, and is not offered
    with pytest.raises(ModelTooLarge) as info:
        check_fits("resnet18", (), torch.bfloat16, "cpu", free_bytes=lambda device: 2 ** 20)
    assert str(info.value) == ("resnet18: 11.7 M parameters are 44.6 MiB in float32; the CPU has 1.0 MiB free; "
                               "give a smaller model")


def test_a_torchvision_model_for_a_gpu_is_checked_against_the_cpu_it_is_built_on_too():
    asked = []

    def free(device):
        asked.append(str(device))
        return 2 ** 40 if device.type == "cuda" else 2 ** 20

    with pytest.raises(ModelTooLarge, match=r"in float32; the CPU has 1.0 MiB free"):
        check_fits("resnet18", (), torch.float16, "cuda:0", free_bytes=free)
    assert asked == ["cpu"]
    with pytest.raises(ModelTooLarge, match=r"^resnet18: 11.7 M parameters are 44.6 MiB in float32; cuda:0 has 1.0 MiB "
                                            r"free; give a smaller model, or --dtype bfloat16 for half the bytes$"):
        check_fits("resnet18", (), torch.float32, "cuda:0",
                   free_bytes=lambda device: 2 ** 20 if device.type == "cuda" else 2 ** 40)
    half_fits = 30 * 2 ** 20
    check_fits("resnet18", (), torch.float16, "cuda:0",
               free_bytes=lambda device: half_fits if device.type == "cuda" else 2 ** 40)


def test_the_catalogue_lists_every_source():
    timm = list_models("timm")
    assert len(timm) > 1000 and all(e.source == "timm" and e.name.startswith("timm:") for e in timm)
    assert next(e for e in timm if e.name == "timm:inception_v3").input_shape == (3, 299, 299)
    hf = {e.name: e for e in list_models("hf")}
    assert hf["hf:llama"].task == "causal-lm" and hf["hf:bert"].task == "base" and hf["hf:t5"].task == "base"
    everything = list_models()
    assert {e.source for e in everything} == {"torchvision", "timm", "hf"}
    assert [e.name for e in list_models("torchvision")][:1] == [everything[0].name]
    with pytest.raises(ModelError, match="unknown model source 'tf': choose one of torchvision, timm, hf"):
        list_models("tf")


def test_a_missing_library_leaves_its_source_out_of_the_whole_list_and_is_named_when_asked(monkeypatch):
    from torchperf_tui.engine.workloads import timm_models

    from torchperf_tui.engine.workloads import catalogue_cache

    monkeypatch.setitem(sys.modules, "timm", None)
    real_key = catalogue_cache.version_key
    monkeypatch.setattr(catalogue_cache, "version_key",  # not installed: no version, no kept listing
                        lambda source: None if source == "timm" else real_key(source))
    timm_models._names.cache_clear()
    try:
        assert "timm" not in {e.source for e in list_models()}
        with pytest.raises(ModelError, match="pip install timm"):
            list_models("timm")
        with pytest.raises(ModelError, match="pip install timm"):
            resolve_model("timm:resnet18")
    finally:
        timm_models._names.cache_clear()


def test_the_catalogue_table_shows_each_source_and_an_hf_type_with_its_head(capsys):
    from torchperf_tui.cli.render_facts import render_catalogue

    wanted = {"resnet18", "timm:resnet18", "hf:llama", "hf:bert"}
    render_catalogue([e for e in list_models() if e.name in wanted])
    out = capsys.readouterr().out
    rows = {line.split("│")[3].strip(): [c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()
            if line.startswith("│") and line.split("│")[3].strip()}
    assert rows["resnet18"][:2] == ["torchvision", "classification"] and rows["resnet18"][3] == "3x224x224"
    assert rows["timm:resnet18"][:2] == ["timm", "classification"]
    assert rows["hf:bert"][:2] == ["hf", "base"] and rows["hf:llama"][1] == "causal-lm"
    assert "--seq-len" in out


def test_a_run_builds_an_hf_model_with_its_overrides_in_the_run_dtype():
    from torchperf_tui.engine.workloads.workload import prepare_workload

    inputs = input_spec_for("hf:llama", batch=1, seq_len=8, model_args=TINY_LLAMA)
    work = prepare_workload("hf:llama", inputs, torch.device("cpu"), torch.bfloat16, model_args=TINY_LLAMA)
    assert work.model.config.num_hidden_layers == 2 and next(work.model.parameters()).dtype == torch.bfloat16
    assert work.x.kwargs["input_ids"].dtype == torch.int64
    with torch.no_grad():
        assert work.x.call(work.model).logits.shape == (1, 8, 97)
