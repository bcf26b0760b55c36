"""The README is the one-screen start and docs/ the reference: every command and option the CLI's parser takes is in
docs/commands.md, every key the app binds is in docs/keys.md, every page is reachable from docs/index.md, and every
relative link and picture in them resolves (files, and the headings a link points into). The lists are read from the
code (build_parser, the BINDINGS of the app, its screens and its panes), so a new option or key fails here until it is
documented."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

from torchperf_tui.cli.args import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))

# Textual's key names as a person types them (and as keys.md writes them in backticks).
KEY_WORDS = {"slash": "/", "question_mark": "?", "escape": "esc", "right_square_bracket": "]",
             "left_square_bracket": "[", "enter": "⏎", "space": "space", "tab": "tab"}


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prose(text: str) -> str:
    """The text without its fenced code blocks and inline code, where a bracket is code, not a link."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)  # noqa: SLF001
            for name, sub in action.choices.items()}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings  # noqa: SLF001
            if flag not in ("-h", "--help")}


def mentioned(option: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


# -- commands and options -------------------------------------------------------------------------------------

def test_the_parser_has_commands_and_options_to_check():
    parser = build_parser()
    assert {"bench", "compare", "sweep", "export", "exporter"} <= set(subcommands(parser))
    assert "--demo" in options(parser) and "--fail-if-slower" in options(subcommands(parser)["compare"])


def test_every_command_has_its_section_in_commands_md():
    text = read(DOCS / "commands.md")
    missing = [name for name in subcommands(build_parser())
               if not re.search(rf"^#+ {re.escape(name)}(\s|$)", text, flags=re.M)]
    assert missing == [], f"docs/commands.md has no section for: {missing}"


def test_every_option_of_the_app_and_of_every_command_is_in_commands_md():
    text = read(DOCS / "commands.md")
    parser = build_parser()
    missing = sorted(f"{name or 'torchperf-tui'} {option}"
                     for name, sub in [("", parser), *subcommands(parser).items()]
                     for option in options(sub) if not mentioned(option, text))
    assert missing == [], f"docs/commands.md does not say: {missing}"


# -- keys ---------------------------------------------------------------------------------------------------

def bound_keys() -> dict[str, str]:
    """Every key bound by the app, its screens and its widgets -> where (class name), as a person types it."""
    import torchperf_tui.app as app_package

    keys: dict[str, str] = {}
    for module_info in pkgutil.walk_packages(app_package.__path__, app_package.__name__ + "."):
        module = importlib.import_module(module_info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or "BINDINGS" not in cls.__dict__:
                continue
            for binding in cls.__dict__["BINDINGS"]:
                key_names = binding.key if hasattr(binding, "key") else binding[0]
                for key in key_names.split(","):
                    keys.setdefault(KEY_WORDS.get(key.strip(), key.strip()), name)
    return keys


def test_the_app_binds_keys_to_check():
    keys = bound_keys()
    assert {"r", "/", "?", "esc", "1", "9", "]", "w", "M"} <= set(keys)


def test_every_key_the_app_binds_is_in_keys_md():
    spans = set(re.findall(r"`([^`\n]+)`", read(DOCS / "keys.md")))
    missing = sorted(f"{key} ({where})" for key, where in bound_keys().items() if key not in spans)
    assert missing == [], f"docs/keys.md does not say: {missing}"


def test_a_key_table_cell_is_one_line():
    """A row of the key tables says what the key does in one line; the details are on the feature's page."""
    cells = [line.strip("|").split(" | ")[1].strip() for line in read(DOCS / "keys.md").splitlines()
             if line.startswith("| `")]
    assert cells and [cell for cell in cells if len(cell) > 120] == []


# -- links, pictures and pages ------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for line in prose_lines(path):
        match = re.match(r"#+ (.*)", line)
        if match:
            base, n = slug(match.group(1)), 0
            while (name := base if n == 0 else f"{base}-{n}") in found:
                n += 1
            found.add(name)
    return found


def prose_lines(path: Path) -> list[str]:
    return re.sub(r"^```.*?^```", "", read(path), flags=re.S | re.M).splitlines()


def links(path: Path) -> list[str]:
    """The targets of the Markdown links and images in `path` (code left out)."""
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose(read(path)))


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_and_picture_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading '{anchor}' in {dest.name}")
    assert broken == [], f"{page.name}: {broken}"


def test_every_page_is_reached_from_the_index_and_leads_back_to_it():
    index = {(DOCS / target.partition("#")[0]).resolve() for target in links(DOCS / "index.md")}
    assert {page.resolve() for page in PAGES if page.name != "index.md"} <= index
    assert [page.name for page in PAGES if page.name != "index.md" and "index.md" not in links(page)] == []


def test_the_readme_is_one_screen_with_the_two_commands_and_the_way_to_the_rest():
    text = read(README)
    assert len(text.splitlines()) <= 60
    blocks = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    assert "sh scripts/install.sh && .venv/bin/torchperf-tui" in blocks
    assert "sh scripts/install.sh --test && .venv/bin/python -m pytest" in blocks
    examples = [line for block in blocks for line in block.splitlines() if "torchperf-tui " in line
                and not line.startswith("sh ")]
    assert len(examples) == 5
    assert len(re.findall(r"!\[[^\]]*\]\(", text)) == 1  # one picture
    assert "docs/index.md" in links(README)


def test_the_readmes_examples_are_commands_the_parser_takes():
    from torchperf_tui.cli.baseline import baseline_requested

    text = read(README)
    for line in re.findall(r"^\.venv/bin/torchperf-tui (.*?)(?:\s+#.*)?$", text, flags=re.M):
        argv = line.split(" > ")[0].replace('""', "''").split()
        argv = ["" if word == "''" else word for word in argv]
        build_parser(baseline=baseline_requested(argv)).parse_args(argv)  # exits (a test failure) if it cannot
