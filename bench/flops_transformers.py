"""FLOP counting of a 7 B decoder without its weights: transformers' default llama config (LlamaConfig(): 32 layers,
hidden 4096, MLP 11008, 32 heads, vocabulary 32000, 6.74 B parameters) built on the meta device and analysed at
batch 1, sequence 128, forward and a training step, each in a fresh process so its peak memory is its own.

Prints, per step: the time to import, to build on meta and to analyse (with the per-layer table), the peak RSS
after the imports and at the end (the analysis itself must stay well under 1.5 GB: nothing may be materialised),
and the FLOPs against the closed form (every linear 2*B*S*in*out, lm_head included, attention 2*2*B*heads*S*S*
head_dim per layer; a training step's backward twice the forward).

    PYTHONPATH=tui .venv/bin/python bench/flops_transformers.py [--seq 128] [--batch 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

from flops_speed import machine  # bench/flops_speed.py

CHILD = textwrap.dedent('''
    import json, resource, statistics, sys, time, warnings
    warnings.filterwarnings("ignore")
    batch, seq, step, repeats = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    import torch, transformers
    from torchperf_tui.engine.workloads.complexity import analyse_complexity
    from torchperf_tui.engine.workloads.input_spec import InputSpec, TensorSpec
    imported, rss_imported = time.perf_counter(), rss()
    config = transformers.AutoConfig.for_model("llama")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    built, rss_built = time.perf_counter(), rss()
    spec = InputSpec((batch, seq), main=TensorSpec("input_ids", "tokens", high=config.vocab_size))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = analyse_complexity(model, (batch, seq), step=step, inputs=spec)
        times.append(time.perf_counter() - t0)
    print(json.dumps({
        "import_s": imported - start, "build_s": built - imported, "first_s": times[0],
        "median_s": statistics.median(times), "rss_imported": rss_imported, "rss_built": rss_built,
        "rss_end": rss(), "params": result.params_total, "flops": result.flops,
        "backward_flops": result.backward_flops, "layers": len(result.layers),
        "attention_flops": result.attention.flops, "causal_calls": result.attention.causal_calls,
        "config": [config.num_hidden_layers, config.hidden_size, config.intermediate_size,
                   config.num_attention_heads, config.num_key_value_heads, config.vocab_size],
        "versions": f"torch {torch.__version__}, transformers {transformers.__version__}"}))
''')


def closed_form(batch: int, seq: int, layers: int, hidden: int, mlp: int, heads: int, kv_heads: int,
                vocab: int) -> int:
    head_dim = hidden // heads
    tokens = batch * seq
    linear = 2 * tokens * (hidden * hidden * 2 + hidden * kv_heads * head_dim * 2 + 3 * hidden * mlp)
    attention = 2 * 2 * batch * heads * seq * seq * head_dim
    return layers * (linear + attention) + 2 * tokens * hidden * vocab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    mb = 1024 * 1024
    print("FLOP counting of transformers' default llama config (7 B) on the meta device, no weights")
    print(f"machine: {machine()}")
    print(f"input: input_ids {args.batch}x{args.seq}; fresh process per step; the analysis timed {args.repeats}x "
          "(first and median), per-layer table on")
    for step in ("infer", "train"):
        out = subprocess.run([sys.executable, "-c", CHILD, str(args.batch), str(args.seq), step, str(args.repeats)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if step == "infer":
            print(f"versions: {r['versions']}; config (layers, hidden, mlp, heads, kv heads, vocab) = {r['config']}")
        expected = closed_form(args.batch, args.seq, *r["config"])
        print(f"\n{step}: {r['params'] / 1e9:.2f} B params, {r['layers']} layer rows")
        print(f"  import {r['import_s']:.2f} s · build on meta {r['build_s']:.2f} s · analyse first "
              f"{r['first_s']:.2f} s, median {r['median_s']:.2f} s")
        print(f"  peak RSS: after imports {r['rss_imported'] / mb:.0f} MB, after the build {r['rss_built'] / mb:.0f} MB,"
              f" at the end {r['rss_end'] / mb:.0f} MB (the analysis added {(r['rss_end'] - r['rss_built']) / mb:.0f} MB)")
        print(f"  forward {r['flops']:,} FLOPs, closed form {expected:,}: "
              f"{'equal' if r['flops'] == expected else 'DIFFERENT'}; SDPA {r['attention_flops']:,} "
              f"({r['causal_calls']} causal calls, counted as the full S×S)")
        if r["backward_flops"] is not None:
            print(f"  backward {r['backward_flops']:,} FLOPs = {r['backward_flops'] / r['flops']:.3f}x the forward")


if __name__ == "__main__":
    main()
