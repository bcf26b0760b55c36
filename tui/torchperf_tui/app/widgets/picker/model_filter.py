"""The picker's filter over every model source: what is typed narrows the catalogue to the names that hold its
letters in order (fuzzy, as Textual's command palette matches), best matches first, grouped by source.

Textual's own `textual.fuzzy.Matcher` is the same idea, but it scores every placement of the letters in a name to
find the best (up to 0.5 ms for one long timm name): 9-28 ms for the 2,314 names of bench/picker_filter.py on each
keystroke (as loaded as the shared box was), before the list is built. Here one left-to-right pass per name decides
the match and its score (2-6 ms for the whole catalogue on a quiet box): a name holding the text as typed outranks one holding its letters apart, a name starting
with it outranks one holding it further in, and fewer runs of letters outrank more.
No Textual and no torch here: plain functions a test calls directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchperf_tui.engine.workloads.model_source import PREFIXES, SOURCES

SOURCE_TITLES = {"torchvision": "torchvision", "timm": "timm", "hf": "transformers", "custom": "custom"}
_SEPARATORS = "_-./: "


def entry_source(entry) -> str:
    """The source of a catalogue entry ('torchvision' for an entry from before the sources carried one)."""
    return getattr(entry, "source", None) or "torchvision"


def bare_name(name: str) -> str:
    """The name without its source's prefix ('timm:resnet18' -> 'resnet18'): what the filter's letters match."""
    lowered = name.lower()
    for prefix in PREFIXES.values():
        if lowered.startswith(prefix):
            return name[len(prefix):]
    return name


def split_query(text: str) -> tuple[str | None, list[str]]:
    """(the source a leading 'hf:' or 'timm:' names, or None; the words to match, lower case)."""
    text = text.strip().lower()
    source = None
    for name, prefix in PREFIXES.items():
        if text.startswith(prefix):
            source, text = name, text[len(prefix):]
            break
    return source, text.split()


def fuzzy_score(word: str, candidate: str) -> float | None:
    """How well `word` matches `candidate` (both lower case): None when its letters are not all in it in order.
    Whole name > prefix > the word as one run (at a word start > inside) > its letters apart: fewer runs first, then
    runs that start words ('vitb16': vit_base_patch16_224 before samvit_base_patch16); a shorter name ranks above a
    longer one at the same kind of match."""
    if not word:
        return 0.0
    shorter = 1.0 / (1 + len(candidate))  # ties go to the shorter name
    at = candidate.find(word)
    if at >= 0:
        if at == 0:
            return (4.0 if len(word) == len(candidate) else 3.0) + shorter
        return (2.5 if candidate[at - 1] in _SEPARATORS else 2.0) + shorter
    runs, word_starts, position, previous = 0, 0, 0, -2
    for letter in word:
        found = candidate.find(letter, position)
        if found < 0:
            return None
        if found != previous + 1:
            runs += 1
            word_starts += found == 0 or candidate[found - 1] in _SEPARATORS
        previous, position = found, found + 1
    # At most 0.5 + 0.4 + 0.01: below any name holding the word as one run (2.0 and up).
    return 1.0 / (1 + runs) + 0.4 * word_starts / runs + shorter / 100


def match_score(words: list[str], candidate: str) -> float | None:
    """The sum of each word's score (every word must match), or None."""
    total = 0.0
    for word in words:
        score = fuzzy_score(word, candidate)
        if score is None:
            return None
        total += score
    return total


@dataclass
class Group:
    """One heading of the list: a source (torchvision's split by task) and its matching entries, best first."""

    source: str
    task: str | None
    entries: list
    scores: list[float]
    best: float = 0.0

    @property
    def title(self) -> str:
        title = SOURCE_TITLES.get(self.source, self.source)
        return f"{title} · {self.task}" if self.task else title


class CatalogueIndex:
    """The catalogue made ready to filter once (each entry's source, group and the lower-case name its letters
    match), so a keystroke only scores."""

    def __init__(self, entries: list) -> None:
        self.rows = []
        for entry in entries:
            source = entry_source(entry)
            group = (source, entry.task if source == "torchvision" else None)
            self.rows.append((entry, source, group, bare_name(entry.name).lower()))

    def filter(self, text: str) -> list[Group]:
        """The entries matching `text`, grouped: torchvision's by task, every other source as one group. With
        nothing typed, the catalogue's own order; with a query, each group's entries best first and the groups in
        the order of their best match (ties: the catalogue's order of sources)."""
        source, words = split_query(text)
        groups: dict[tuple[str, str | None], Group] = {}
        scored: dict[tuple[str, str | None], list] = {}
        for order, (entry, entry_from, key, name) in enumerate(self.rows):
            if source is not None and entry_from != source:
                continue
            score = match_score(words, name) if words else 0.0
            if score is None:
                continue
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(entry_from, key[1], [], [], score)
                scored[key] = []
            scored[key].append((score, order, entry))
            group.best = max(group.best, score)
        if words:
            for items in scored.values():
                items.sort(key=lambda item: (-item[0], item[1]))
        for key, group in groups.items():
            group.scores = [score for score, _, _ in scored[key]]
            group.entries = [entry for _, _, entry in scored[key]]
        ranked = list(groups.values())
        if words:
            source_rank = {name: i for i, name in enumerate(SOURCES)}
            ranked.sort(key=lambda g: (-g.best, source_rank.get(g.source, len(SOURCES))))
        return ranked


def filter_catalogue(entries: list, text: str) -> list[Group]:
    """CatalogueIndex(entries).filter(text), for a catalogue filtered once."""
    return CatalogueIndex(entries).filter(text)
