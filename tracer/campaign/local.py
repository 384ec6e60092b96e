"""Runs a campaign's cells one at a time on this machine (runs sharing a machine disturb each other's
measurements), each as a `tracer profile` child process.

A child per cell keeps a crash, a hang or a leak of one run from touching the next, and lets the
campaign be killed at any instant: the child is told to die with its parent (Linux `PR_SET_PDEATHSIG`,
SIGTERM, which `tracer profile` records as an interrupted run), and the restarted campaign finds any
child that escaped by its pid and its staging folder, ends it, and runs the cell again.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from tracer.campaign.plan import Cell
from tracer.campaign.record import OK, Campaign, CellEntry
from tracer.campaign.view import CampaignView

PR_SET_PDEATHSIG = 1
KILL_GRACE_S = 15.0
LOG_TAIL_BYTES = 4096


def profile_command(args: list[str], out: Path) -> list[str]:
    """`tracer profile --out OUT ARGS` under this interpreter (on a Ray node: the node's own); ARGS last,
    for a command's end with `-- COMMAND ...`."""
    return [sys.executable, "-m", "tracer", "profile", "--out", str(out), *args]


def die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGTERM it when the campaign process dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the restart's kill_leftover is the fallback
        pass


def kill_leftover(entry: CellEntry, staging: Path) -> None:
    """Ends a `tracer profile` that outlived a killed campaign, then any worker of the cell still
    alive (with its loader processes); only processes whose command line names this cell's staging
    folder are touched."""
    _kill_profile(entry, staging)
    _kill_workers(staging)


def _kill_workers(staging: Path) -> None:
    """A worker whose tracer was SIGKILLed ends itself within a second (tracer/worker/lifeline.py);
    this makes sure of it before the cell runs again, so two trainings never share the machine."""
    victims = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.pid != os.getpid() and str(staging) in " ".join(proc.info["cmdline"] or ()):
                victims.append(proc)
                victims.extend(proc.children(recursive=True))
        except psutil.Error:
            continue
    for proc in victims:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=KILL_GRACE_S)


def _kill_profile(entry: CellEntry, staging: Path) -> None:
    if entry.pid is None:
        return
    try:
        proc = psutil.Process(entry.pid)
        if str(staging) not in " ".join(proc.cmdline()):
            return
        proc.terminate()
        proc.wait(KILL_GRACE_S)
    except psutil.TimeoutExpired:
        proc.kill()
    except psutil.Error:
        return


def log_tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def run_cell(campaign: Campaign, cell: Cell) -> CellEntry:
    """One attempt at one cell: marked running, profiled in a child, moved into `<out>/`, recorded."""
    entry = campaign.begin(cell)
    stage = campaign.staging(cell.cell_id)
    log = campaign.log_path(cell.cell_id, entry.attempts)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as f:
        proc = subprocess.Popen(
            profile_command(cell.profile_args(), stage.resolve()),
            stdout=f,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
            cwd=cell.cwd,  # a command runs where its plan file is
        )
    campaign.set_pid(cell.cell_id, proc.pid)
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # leave the cell `running`: the next start settles it
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        raise
    return campaign.finish(cell, f"tracer profile exited with code {code}: {log_tail(log)} (log: {log})")


def run_local(campaign: Campaign, cells: list[Cell], retry: int, view: CampaignView) -> None:
    for cell in cells:
        for attempt in range(retry + 1):
            view.started(cell)
            entry = run_cell(campaign, cell)
            final = entry.state == OK or attempt == retry
            view.ended(cell, entry, final)
            if final:
                break
