"""The GPU's other tenants beside a run: the other processes NVML lists on it (compute and graphics), with the GPU
memory each held and the share of the SMs each used over the run's windows, and the GPU's MIG and MPS state.

A video decode or a second job on the same GPU slows a run as much as a busy host does, and nothing in the run's own
figures shows it: a run beside another tenant is marked disturbed, as host noise marks it. Read at each edge of a
timed window (outside the timer), so a process that came and went between them is missed; the per-process SM share
is NVML's samples since the window opened, where the driver keeps them. This process and its children (inductor's
autotuning workers) are never tenants; a tenant whose SM share NVML sampled at 0 is listed, not a disturbance.

In a container NVML lists the host's process ids, and this process is not among them under its own: it cannot be told
from the others, so none is called a tenant and the conditions say why.

No torch and no textual here, only NVML through engine/hardware/nvml.py (tests drive it with the fake NVML).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.engine.hardware.nvml import NA, Nvml

KINDS = (("nvmlDeviceGetComputeRunningProcesses", "compute"), ("nvmlDeviceGetGraphicsRunningProcesses", "graphics"))
MPS_SERVER = "nvidia-cuda-mps-server"


@dataclass(frozen=True)
class Tenant:
    """Another process on the GPU during a run."""

    pid: int
    name: str  # its command name where this host can see it ('' in another PID namespace)
    kind: str  # "compute", "graphics" or "compute, graphics"
    memory_bytes: int | None = None  # the most GPU memory NVML counted for it (None: not reported, e.g. under MIG)
    sm_pct: float | None = None  # the highest SM share NVML sampled for it over the windows (None: no samples)

    def text(self) -> str:
        """'pid 4242 (ffmpeg, graphics, 1.2 GiB, SM 35 %)'."""
        parts = [p for p in (self.name, self.kind) if p]
        if self.memory_bytes is not None:
            parts.append(format_bytes(self.memory_bytes))
        if self.sm_pct is not None:
            parts.append(f"SM {self.sm_pct:.0f} %")
        return f"pid {self.pid} ({', '.join(parts)})"


def process_name(pid: int) -> str:
    """Process `pid`'s command name where this host can see it, '' where it cannot."""
    try:
        return psutil.Process(pid).name()
    except Exception:  # noqa: BLE001 - gone, or in another PID namespace: the pid alone names it
        return ""


class TenantWatch:
    """The other processes on GPU `index`, read at each window edge (`read()`); `since_us` is when the first window
    opened, for NVML's per-process utilisation samples. `own_pid`: this process, never a tenant."""

    def __init__(self, nvml: Nvml, index: int, own_pid: int | None = None) -> None:
        self.nvml, self.index = nvml, index
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.foreign = False  # NVML's pids are another namespace's: this process not among them
        self.seen: dict[int, Tenant] = {}
        self.missing: str | None = None
        self.since_us: int | None = None

    def read(self) -> None:
        """The processes on the GPU now, merged into those seen (each one's most memory), and their SM shares since
        the first reading."""
        now_us = int(time.time() * 1_000_000)
        own = own_pids(self.own_pid)
        for function, kind in KINDS:
            listed = self.nvml.query(self.index, function)
            if isinstance(listed, NA):
                if kind == "compute":  # graphics processes are often not reported: only the compute list is said
                    self.missing = listed.reason
                continue
            if kind == "compute" and listed and not any(int(p.pid) == self.own_pid for p in listed):
                self.foreign = True
                self.missing = ("NVML's process ids are another PID namespace's (a container?): this process is not "
                                "among them, so no other process is told apart from it")
                self.seen.clear()
                return
            for process in listed:
                pid = int(process.pid)
                if pid in own:
                    continue
                used = getattr(process, "usedGpuMemory", None)
                used = used if isinstance(used, int) and not isinstance(used, bool) and used >= 0 else None
                before = self.seen.get(pid)
                kinds = kind if before is None or kind in before.kind else f"{before.kind}, {kind}"
                most = max((m for m in (used, before.memory_bytes if before else None) if m is not None), default=None)
                self.seen[pid] = Tenant(pid, before.name if before else process_name(pid), kinds, most,
                                        before.sm_pct if before else None)
        if self.since_us is not None:
            self._utilisation(self.since_us)
        else:
            self.since_us = now_us

    def _utilisation(self, since_us: int) -> None:
        samples = self.nvml.query(self.index, "nvmlDeviceGetProcessUtilization", since_us)
        if isinstance(samples, NA):
            return  # no samples kept (the driver's default on many GPUs): memory and presence are still said
        for sample in samples:
            pid = int(getattr(sample, "pid", -1))
            tenant = self.seen.get(pid)
            sm = getattr(sample, "smUtil", None)
            if tenant is None or not isinstance(sm, (int, float)) or not 0 <= sm <= 100:
                continue
            self.seen[pid] = Tenant(tenant.pid, tenant.name, tenant.kind, tenant.memory_bytes,
                                    max(sm, tenant.sm_pct or 0.0))

    def tenants(self) -> list[Tenant]:
        return [] if self.foreign else sorted(self.seen.values(), key=lambda t: t.pid)


def own_pids(pid: int) -> set[int]:
    """This process and its descendants (compile workers hold a CUDA context of their own)."""
    try:
        return {pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))}
    except Exception:  # noqa: BLE001 - gone or unreadable: this process alone
        return {pid}


def sharing_mode(nvml: Nvml, index: int, tenants: list[Tenant]) -> str:
    """How the GPU is shared, as far as NVML says: 'MIG on', 'MPS' (its server among the processes), or ''."""
    modes = []
    mig = nvml.query(index, "nvmlDeviceGetMigMode")
    if not isinstance(mig, NA) and isinstance(mig, (list, tuple)) and mig and mig[0] == 1:
        modes.append("MIG on")
    if any(t.name == MPS_SERVER for t in tenants):
        modes.append("MPS")
    return ", ".join(modes)


def tenant_marks(conditions) -> list[str]:
    """A run's marks for the GPU's other tenants (RunConditions.tenants), one line; none without any."""
    tenants = [t if isinstance(t, Tenant) else Tenant(**t) for t in getattr(conditions, "tenants", None) or []]
    tenants = [t for t in tenants if t.sm_pct is None or t.sm_pct > 0]  # sampled idle: it holds memory, no SMs
    if not tenants:
        return []
    listed = "; ".join(t.text() for t in tenants[:4])
    more = f" and {len(tenants) - 4} more" if len(tenants) > 4 else ""
    mode = getattr(conditions, "sharing", "")
    return [f"other processes on the GPU: {listed}{more}" + (f" ({mode})" if mode else "")]
