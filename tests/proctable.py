"""The machine's process table, read from /proc, for tests that watch processes (the
helpers a command starts, a browser's renderers)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Proc(NamedTuple):
    pid: int
    ppid: int
    cmdline: bytes
    rss_bytes: int  # 0 when not known (a kernel thread, a process gone meanwhile)
    hwm_bytes: int = 0  # the peak resident size so far (VmHWM): no peak is missed between samples


def processes() -> list[Proc]:
    """Every process readable now; one that exits while it is read is left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        rss = next((ln for ln in status.splitlines() if ln.startswith("VmRSS:")), None)
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        hwm = next((ln for ln in status.splitlines() if ln.startswith("VmHWM:")), None)
        rss_bytes = int(rss.split()[1]) * 1024 if rss is not None else 0
        hwm_bytes = int(hwm.split()[1]) * 1024 if hwm is not None else 0
        found.append(Proc(int(entry.name), ppid, cmdline, rss_bytes, hwm_bytes))
    return found


def descends_from(proc: Proc, root: int, table: list[Proc]) -> bool:
    """Whether ``proc`` is ``root`` or below it in ``table``."""
    parents = {p.pid: p.ppid for p in table}
    pid = proc.pid
    while pid != root and pid in parents and pid > 1:
        pid = parents[pid]
    return pid == root
