"""Runs a campaign's cells as Slurm jobs, one job per cell, and follows them to the end.

The record is the campaign's memory between submitter processes: a cell is marked `running` before its
`sbatch` and gets its job id right after; the job's name carries campaign, cell and attempt, so a restart
finds a job whose id a killed submitter never wrote down. A restart never submits a cell whose job is
still queued or running; it follows it. A job that ended leaves its run in the cell's staging folder
and is filed as the local runner files it (ok, crash, refused, diverged: `--retry` decides, nothing
else). A job the cluster ended first (node failure, preemption, time limit, scancel) is submitted again,
once per cell, with Slurm's reason in the cell's history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracer.campaign.local import log_tail
from tracer.campaign.plan import Cell
from tracer.campaign.record import OK, RUNNING, Campaign, CellEntry
from tracer.campaign.slurm import (
    CLUSTER_STATES,
    UNKNOWN,
    JobState,
    Slurm,
    SlurmOptions,
    job_name,
    job_script,
    sbatch_settings,
    time_limit,
)
from tracer.campaign.view import CampaignView
from tracer.core.records import RunStatus
from tracer.core.runfolder import RunFolder

POLL_S = 2.0
CLUSTER_RESUBMITS = 1  # per cell: a second cluster failure is recorded as the cell's failure
# A run folder in one of these states was cut short from outside: the job's end decides what it was.
CUT_SHORT = frozenset({RunStatus.INTERRUPTED.value, RunStatus.RUNNING.value, RunStatus.KILLED.value})


@dataclass
class Tracked:
    cell: Cell
    tries_left: int  # --retry: further runs of a cell whose training failed


def adopt(campaign: Campaign, slurm: Slurm) -> list[str]:
    """Before `Campaign.recover`: a cell left `running` without a job id was killed around its `sbatch`;
    its job, if it was submitted, is found by name. Returns notes for the log."""
    notes = []
    for entry in campaign.cells.values():
        if entry.state == RUNNING and entry.job_id is None and entry.host == "slurm":
            found = slurm.find(job_name(campaign.plan.name, entry.cell_id, entry.attempts))
            if found:
                campaign.set_job(entry.cell_id, found)
                notes.append(f"{entry.cell_id}: found its Slurm job {found} by name")
    return notes


def has_job(entry: CellEntry) -> bool:
    """`Campaign.recover` leaves these cells to the Slurm runner."""
    return entry.job_id is not None


def submit(campaign: Campaign, slurm: Slurm, cell: Cell, opts: SlurmOptions, estimate_s: float | None) -> str:
    entry = campaign.begin(cell, host="slurm")
    name = job_name(campaign.plan.name, cell.cell_id, entry.attempts)
    log = campaign.log_path(cell.cell_id, entry.attempts)
    log.parent.mkdir(parents=True, exist_ok=True)
    settings = sbatch_settings(cell, opts, name, log, time_limit(cell, opts, estimate_s))
    script = campaign.dir / "jobs" / f"{cell.cell_id}.{entry.attempts}.sbatch"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(job_script(cell, settings, campaign.staging(cell.cell_id)))
    job_id = slurm.submit(script)
    campaign.set_job(cell.cell_id, job_id)
    return job_id


def _staged_status(campaign: Campaign, cell_id: str) -> str | None:
    stage = campaign.staging(cell_id)
    folders = sorted(p for p in stage.iterdir() if p.is_dir()) if stage.is_dir() else []
    if not folders:
        return None
    try:
        return RunFolder(folders[-1]).read_record().outcome.status.value
    except Exception:  # noqa: BLE001 - an unreadable run.json: the job died while writing it
        return RunStatus.RUNNING.value


def settle(campaign: Campaign, cell: Cell, job: JobState, log: Path) -> tuple[CellEntry, bool]:
    """Files the cell whose job ended; returns its entry and whether the cluster, not the run, ended it
    (then it is to be submitted again, if it has a resubmit left)."""
    entry = campaign.cells[cell.cell_id]
    status = _staged_status(campaign, cell.cell_id)
    cluster = job.state in CLUSTER_STATES or (job.state == UNKNOWN and status in (None, *CUT_SHORT))
    if (status is None or status in CUT_SHORT) and cluster and entry.resubmits < CLUSTER_RESUBMITS:
        return campaign.requeue(cell, f"{job.describe()}; submitted again"), True
    entry = campaign.finish(cell, f"{job.describe()}: {log_tail(log)} (log: {log})")
    if status in CUT_SHORT or (status is not None and job.state in CLUSTER_STATES and entry.state != OK):
        entry.cause = f"{job.describe()} ({entry.cause})" if entry.cause else job.describe()
        campaign.save()
    return entry, False


def run_slurm(
    campaign: Campaign,
    cells: list[Cell],
    retry: int,
    view: CampaignView,
    opts: SlurmOptions,
    slurm: Slurm,
    estimates: dict[str, float | None],
    detach: bool = False,
    confirm: Callable[[str], bool] | None = None,
) -> list[str]:
    """Submits `cells` (at most --max-jobs in Slurm at a time) and follows them and the jobs a killed
    submitter left, until all ended; with `detach`, returns once everything that fits is submitted.
    Returns the job ids still in Slurm (those `detach` leaves running). On Ctrl-C, `confirm` decides
    whether the campaign's jobs are cancelled."""
    by_id = {c.cell_id: c for c in campaign.plan.cells}
    tracked: dict[str, Tracked] = {}
    for entry in campaign.entries():
        if entry.state == RUNNING and entry.job_id is not None:
            tracked[entry.cell_id] = Tracked(by_id[entry.cell_id], retry)
            view.started(by_id[entry.cell_id], f"slurm job {entry.job_id}")
    queue = [c for c in cells if c.cell_id not in tracked]
    if tracked:
        view.note(f"slurm: following {len(tracked)} job(s) submitted before: {' '.join(_ids(campaign, tracked))}")
    shown = (-1, -1)
    try:
        while True:
            while queue and (opts.max_jobs is None or len(tracked) < opts.max_jobs):
                cell = queue.pop(0)
                tracked[cell.cell_id] = Tracked(cell, retry)
                job_id = submit(campaign, slurm, cell, opts, estimates.get(cell.cell_id))
                view.started(cell, f"slurm job {job_id}")
            if detach or not tracked:
                return _ids(campaign, tracked)
            jobs = slurm.states(_ids(campaign, tracked))
            for cell_id in list(tracked):
                item = tracked[cell_id]
                entry = campaign.cells[cell_id]
                job = jobs[str(entry.job_id)]
                if job.active:
                    if job.state == "RUNNING" and job.node and entry.host != job.node:
                        campaign.job_running(cell_id, job.node)
                    continue
                log = campaign.log_path(cell_id, entry.attempts)
                entry, again = settle(campaign, item.cell, job, log)
                final = not again and (entry.state == OK or item.tries_left == 0)
                view.ended(item.cell, entry, final)
                if final:
                    del tracked[cell_id]
                    continue
                if not again:
                    item.tries_left -= 1
                job_id = submit(campaign, slurm, item.cell, opts, estimates.get(cell_id))
                view.started(item.cell, f"slurm job {job_id}")
            active = [jobs[j] for j in _ids(campaign, tracked) if j in jobs and jobs[j].active]
            running = sum(j.state == "RUNNING" for j in active)
            now = (running, len(tracked) - running + len(queue))
            view.queue(*now)
            if now != shown:  # a plain line where the bar is not drawn (logs, pipes)
                view.note(f"slurm: {now[0]} running, {now[1]} queued")
                shown = now
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        ids = _ids(campaign, tracked)
        view.close()
        if ids and confirm is not None and confirm(f"cancel the campaign's {len(ids)} Slurm job(s) ({' '.join(ids)})?"):
            slurm.cancel(ids)
            for cell_id in (c for c in tracked if campaign.cells[c].job_id):
                campaign.cancelled(cell_id, f"Slurm job {campaign.cells[cell_id].job_id} cancelled (Ctrl-C)")
            view.note(f"slurm: cancelled job(s) {' '.join(ids)}")
        elif ids:
            view.note(f"slurm: left job(s) {' '.join(ids)} running: run the same command again to follow them")
        raise


def _ids(campaign: Campaign, tracked: dict[str, Tracked]) -> list[str]:
    return [str(campaign.cells[c].job_id) for c in tracked if campaign.cells[c].job_id]
