"""A kernel's name made short enough to read beside another's: CUDA kernels and ATen ops run to hundreds of
characters of templates, namespaces and tile configuration. Text only (the kernel view's words, wording/kernels.py)."""

from __future__ import annotations

import re


_GENERIC = re.compile(r"(?i)^(device_)?kernel\d*(_traits)?$|^params$")
_CONFIG = re.compile(r"(?i)^(tilesize|warpsize|warpgroupsize|stage|execute)")
_DROP = re.compile(r"(?i)^(g\d+|\d+x\d+(x\d+)?|tensor\d+x\d+x\d+|align\d+|kernel|[nchwdkrs]{4,8})$")
_DTYPE = re.compile(r"^(?:tf32|bf16|fp16|fp32|f16|f32|f64|s8|i8|s32|i32|u8)+$")


def _split_name(text: str) -> tuple[str, str]:
    """'ns::name<args>(params)' -> ('ns::name', 'args'): the name before its template arguments, and those."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0:
            text = text[:i]
            break
    start = text.find("<")
    return (text.strip(), "") if start < 0 else (text[:start].strip(), text[start + 1:text.rfind(">")].strip())


def _mangled_words(name: str) -> list[str]:
    """The identifiers of an Itanium-mangled name ('_ZN17cutlass__5x_cudnn6KernelI...': each a length, then
    that many characters); the profiler reports some CUTLASS kernels so."""
    words, i = [], 2
    while i < len(name):
        digits = re.match(r"\d+", name[i:])
        if digits is None:
            i += 1
            continue
        start = i + len(digits.group())
        words.append(name[start:start + int(digits.group())])
        i = start + int(digits.group())
    return words


def short_kernel_name(name: str, width: int = 40) -> str:
    """A readable name for a long CUDA kernel (or ATen op): no 'void', template arguments, parameters,
    namespaces or tile configuration; a generic wrapper (cutlass::Kernel<...>) is named by its argument; a
    mangled name by its longest identifier (the kernel's own, 'cutlass_tensorop_s1688wgrad_...')."""
    text = name.strip().removeprefix("void ").replace("(anonymous namespace)::", "")
    if text.startswith("_Z") and (words := [w for w in _mangled_words(text) if w.isidentifier()]):
        text = max(words, key=len)
    outer, inner = _split_name(text)
    parts = [p for p in outer.split("::") if p]
    if parts and _GENERIC.match(parts[-1]) and inner:
        first_arg = _split_name(inner)[0].split(",")[0]
        inner_parts = [p.strip() for p in first_arg.split("::") if p.strip() and not _GENERIC.match(p.strip())]
        parts = ["_".join(inner_parts[-2:])] if inner_parts else parts
    short = parts[-1] if parts else text
    tokens, kept, seen_dtype = short.split("_"), [], False
    if len(tokens) > 3:  # a long generated name: drop its configuration, keep the family and first dtype
        for token in tokens:
            if _CONFIG.match(token):
                break
            if _DROP.match(token) or (_DTYPE.match(token) and seen_dtype):
                continue
            seen_dtype = seen_dtype or bool(_DTYPE.match(token))
            kept.append(token)
        short = "_".join(kept) or short
    return _fit(short, width)


def short_kernel_names(names: list[str], width: int = 40) -> dict[str, str]:
    """{full name: short name} for the kernels shown side by side (one layer's, under A and B). Two different
    kernels that shorten alike (the same family in another tile configuration) each get the first token of
    their full name that the others lack, so a layer marked changed never shows the same text for A and B."""
    shorts = {name: short_kernel_name(name, width) for name in dict.fromkeys(names)}
    alike: dict[str, list[str]] = {}
    for name, short in shorts.items():
        alike.setdefault(short, []).append(name)
    for group in (g for g in alike.values() if len(g) > 1):
        tokens = {name: re.findall(r"[A-Za-z0-9]+", name) for name in group}
        for index, name in enumerate(group):
            others = {t for other in group if other != name for t in tokens[other]}
            tag = next((t for t in tokens[name] if t not in others), f"#{index + 1}")
            tag = (re.sub(r"^[A-Za-z]+(?=\d)", "", tag) if len(tag) > 14 else tag)[:14]  # tilesize128x128x32
            shorts[name] = f"{short_kernel_name(name, max(8, width - len(tag) - 1))}·{tag}"
    return shorts


def _fit(text: str, width: int) -> str:
    """Drop whole tokens from the middle first ('cutlass_80_tensorop_s1688fprop_…_tf32'), then characters."""
    if len(text) <= width:
        return text
    head, tail = text.split("_")[:-1], text.split("_")[-1]
    while len(head) > 1 and len("_".join(head)) + len(tail) + 3 > width:
        head.pop()
    if head and len("_".join(head)) + len(tail) + 3 <= width:
        return f"{'_'.join(head)}_…_{tail}"
    keep = (width - 1) * 2 // 3
    return text[:keep] + "…" + text[len(text) - (width - 1 - keep):]
