"""`torch` for engine modules whose types must load without it.

The app's UI process unpickles the engine's results (a TimingResult, a Flags, an ABResult) to show them,
and must never import torch: that belongs to the measurement process. Engine modules therefore write
`from torchperf_tui.engine.hardware.lazy_torch import torch` and use `torch.x` inside their functions as usual;
torch is imported on the first such use, in the process that measures. Modules that subclass a torch class
at import time cannot do this, and keep their result types in a module of their own instead.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any


class _LazyModule(ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_target"] = name

    def _load(self) -> ModuleType:
        module = sys.modules.get(self._target)
        return module if module is not None else importlib.import_module(self._target)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._target!r}>"


torch: Any = _LazyModule("torch")
