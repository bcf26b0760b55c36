"""A keystroke in the model picker's filter, over every source's names (torchvision, timm, transformers): the
time the UI thread spends refiltering and relisting (ModelPicker._refilter: scoring every name, building the
options, the OptionList measuring their rows) and drawing the list's visible rows after it. Budget: well under
50 ms a keystroke (issue 23), so typing never stalls.

The names are this machine's: torchvision.models.list_models(), timm.list_models() as "timm:NAME" and transformers'
model types as "hf:TYPE", listed by a child process (the app's process never imports torch); the app gets them
as its catalogue from a fake measurement process. Each query is typed a letter at a time; every prefix is one
keystroke. Textual's own fuzzy matcher (textual.fuzzy.Matcher) over the same names is timed beside it, as the
reason the picker scores with one pass per name instead.

    PYTHONPATH=tui .venv/bin/python bench/picker_filter.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

QUERIES = ("resnet18", "timm:vitb16", "hf:gpt2", "convnextv2", "efficientnet_b0", "llama", "x")

LIST_NAMES = """
import json, timm, torchvision.models as tvm
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
print(json.dumps({"torchvision": tvm.list_models(), "timm": timm.list_models(), "hf": list(CONFIG_MAPPING_NAMES)}))
"""


def catalogue():
    from torchperf_tui.engine.workloads.model_entry import ModelEntry

    @dataclass(frozen=True)
    class SourcedEntry(ModelEntry):
        source: str = "torchvision"

    names = json.loads(subprocess.run([sys.executable, "-c", LIST_NAMES], capture_output=True, text=True,
                                      check=True).stdout)
    return ([SourcedEntry(n, "classification", (3, 224, 224)) for n in sorted(names["torchvision"])]
            + [SourcedEntry(f"timm:{n}", "classification", (3, 224, 224), source="timm") for n in names["timm"]]
            + [SourcedEntry(f"hf:{n}", "text", (128,), source="hf") for n in sorted(names["hf"])])


async def time_keystrokes(entries, repeat: int) -> dict[str, list[float]]:
    sys.path.insert(0, ".")
    from textual.widgets import OptionList

    from tests.app.helpers import make_app, wait_until
    from tests.fakes.fake_measurement import FakeMeasurement

    app = make_app(frozen=True, measurement=FakeMeasurement({"catalogue": entries}))
    times: dict[str, list] = {"refilter": [], "draw": [], "text": []}
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.main.query("#model-list")
                         and app.main.query_one("#model-list", OptionList).option_count > 1, what="the catalogue")
        picker = app.pane("picker")
        listing = app.main.query_one("#model-list", OptionList)
        for _ in range(repeat):
            for query in QUERIES:
                for end in range(len(query) + 1):
                    start = time.perf_counter()
                    picker._refilter(query[:end])
                    mid = time.perf_counter()
                    listing.render_lines(listing.region.reset_offset)  # the visible rows, as the next frame draws
                    done = time.perf_counter()
                    times["refilter"].append((mid - start) * 1e3)
                    times["draw"].append((done - mid) * 1e3)
                    times["text"].append(query[:end])
                    await pilot.pause()
    return times


def textual_matcher_ms(entries, query: str) -> float:
    from textual.fuzzy import Matcher
    from torchperf_tui.app.widgets.picker.model_filter import bare_name

    matcher = Matcher(query)
    start = time.perf_counter()
    for entry in entries:
        matcher.match(bare_name(entry.name))
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    entries = catalogue()
    counts = {s: sum(1 for e in entries if e.source == s) for s in ("torchvision", "timm", "hf")}
    print(f"catalogue: {len(entries)} names ({', '.join(f'{s} {n}' for s, n in counts.items())})")
    times = asyncio.run(time_keystrokes(entries, args.repeat))
    total = [a + b for a, b in zip(times["refilter"], times["draw"])]
    for label, values in (("refilter", times["refilter"]), ("draw list", times["draw"]), ("keystroke", total)):
        ordered = sorted(values)
        print(f"{label:>10}: median {statistics.median(values):6.2f} ms   p90 {ordered[int(0.9 * len(values))]:6.2f} ms"
              f"   max {max(values):6.2f} ms   ({len(values)} keystrokes)")
    slowest = sorted(zip(total, range(len(total)), times["text"]), reverse=True)[:5]
    print("slowest: " + ", ".join(f"{ms:.1f} ms at #{i} {text!r}" for ms, i, text in slowest))
    print("budget: well under 50 ms a keystroke:", "met" if max(total) < 50 else "NOT met")
    for query in ("vitbase16", "vitbasepatch16224"):
        print(f"textual.fuzzy.Matcher({query!r}) over the same names: {textual_matcher_ms(entries, query):8.1f} ms")


if __name__ == "__main__":
    main()
