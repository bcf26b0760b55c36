"""A cold start for torch.compile in a process that stays up and compiles one job after another: each compiled run
gets an empty cache folder of its own for inductor (its FX graph, AOT autograd, autotuning and kernel caches, all
under TORCHINDUCTOR_CACHE_DIR) and Triton (TRITON_CACHE_DIR), and torch's in-memory compile caches (inductor's
registered ones: loaded kernels, generated code, autotuning choices) are cleared before it compiles. Dynamo's own
caches are compile_model's to reset. The folder outlives the run's compile: the warm start's second process compiles
from it (warm_compile.py); then it is removed. Torch reads both variables each time it looks for its caches, so
pointing them elsewhere for a run is enough; what they were is put back after it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"


def clear_compile_caches() -> None:
    """Clear inductor's in-memory caches (torch >= 2.8 names it clear_caches, before clear_inductor_caches); a torch
    with neither has nothing to clear this way."""
    try:
        import torch._inductor.utils as inductor_utils
    except ImportError:
        return
    clear = getattr(inductor_utils, "clear_caches", None) or getattr(inductor_utils, "clear_inductor_caches", None)
    if clear is not None:
        clear()


class CompileCache:
    """The cache folder of one run under torch.compile `mode` (None: an eager run, which gets none, and every method
    does nothing). A context: the folder is made on entry and removed, with all it holds, on exit."""

    def __init__(self, mode: str | None) -> None:
        self.mode = mode
        self.root: str | None = None  # the run's temporary folder: the cache, and the warm start's files beside it

    @property
    def folder(self) -> str | None:
        """Inductor's cache folder (None for an eager run)."""
        return os.path.join(self.root, "inductor") if self.root is not None else None

    def environ(self) -> dict[str, str]:
        """The variables that point torch's caches at the folder."""
        folder = self.folder
        return {} if folder is None else {CACHE_ENV: folder, TRITON_CACHE_ENV: os.path.join(folder, "triton")}

    def __enter__(self) -> "CompileCache":
        if self.mode is not None:
            self.root = tempfile.mkdtemp(prefix="torchperf-compile-")
            os.mkdir(self.folder)
        return self

    def __exit__(self, *exc) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """While the run compiles and runs: torch's caches in the (empty) folder, its in-memory caches cleared first;
        after it, the variables as they were and the in-memory caches cleared again (nothing of this run serves the
        next)."""
        pointed = self.environ()
        if not pointed:
            yield
            return
        saved = {name: os.environ.get(name) for name in pointed}
        os.environ.update(pointed)
        clear_compile_caches()
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            clear_compile_caches()
