"""Models whose code ends their pass in ways that write to the measurement process's stderr or escape an
`except Exception`: a KeyboardInterrupt raised in forward, a segfault (faulthandler's dump goes to stderr)."""

from __future__ import annotations

import os
import signal

import torch


class RaisesKeyboardInterrupt(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            raise KeyboardInterrupt("the model's own")
        return x


class Segfaults(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            os.kill(os.getpid(), signal.SIGSEGV)
        return x


def raises_keyboard_interrupt() -> torch.nn.Module:
    return RaisesKeyboardInterrupt()


def segfaults_in_forward() -> torch.nn.Module:
    return Segfaults()
