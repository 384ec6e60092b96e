"""The campaign record (`<out>/campaigns/<name>/campaign.json`) and the life of a cell's run folder.

A cell is marked `running` (atomically, on disk) before its run starts, and `ok`/`failed` with its run id
after. Its run is written into a staging folder of its own and moved into `<out>/` only when it has
ended, with a `campaign_cell.json` marker, so that after a kill at any instant a restart can tell:

- staging holds a folder: the run was cut short; it moves to `superseded/` and the cell runs again;
- staging is empty but `<out>/` holds a folder marked with the cell and attempt: the run ended and was
  moved, only the record was not updated yet; it is adopted.

Either way `<out>/` ends with exactly one run folder per cell; earlier attempts of a retried cell move
to `superseded/`, never deleted.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable

from tracer.campaign.plan import Cell, Plan
from tracer.core.errors import UserError
from tracer.core.records import RunStatus
from tracer.core.runfolder import RunFolder, list_runs, write_json_atomic
from tracer.core.schema import RUN_JSON

FORMAT_VERSION = 1
MARKER = "campaign_cell.json"
RUNNING, OK, FAILED = "running", "ok", "failed"
REQUEUED = "requeued"  # its job was ended by the cluster; it is submitted again


@dataclass
class CellEntry:
    """What the record knows of one cell; `history` keeps every attempt that did not become the answer."""

    cell_id: str
    fingerprint: str
    state: str = RUNNING
    attempts: int = 0
    run_id: str | None = None
    status: str | None = None
    cause: str = ""
    host: str = ""
    pid: int | None = None
    job_id: str | None = None  # the Slurm job of the current attempt (--slurm)
    resubmits: int = 0  # attempts started again because the cluster, not the run, ended the last one
    started_ns: int | None = None
    ended_ns: int | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def wall_s(self) -> float | None:
        if self.started_ns is None or self.ended_ns is None:
            return None
        return (self.ended_ns - self.started_ns) / 1e9


def _one_name(value: object) -> bool:
    """Whether `value`, read from a record, names one entry of a folder (never a path out of it)."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\0" not in value


class Campaign:
    """A plan's campaign folder, held by one process at a time (an advisory lock the kernel drops on kill)."""

    def __init__(self, plan: Plan, out_dir: Path) -> None:
        self.plan = plan
        self.out_dir = out_dir
        self.dir = out_dir / "campaigns" / plan.name
        self.path = self.dir / "campaign.json"
        self.cells: dict[str, CellEntry] = {}
        self.created_ns = time.time_ns()
        self._lock: IO[str] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def open(self) -> Campaign:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = (self.dir / "lock").open("w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise UserError(
                f"campaign '{self.plan.name}' is already running from another process ({self.dir})"
            ) from None
        self._load()
        self._check_plan()
        return self

    def peek(self) -> Campaign:
        """Reads the record without taking the campaign (for --dry-run, which changes nothing)."""
        self._load()
        return self

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> Campaign:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise UserError(f"{self.path} is unreadable ({e}); move it away to start the campaign afresh") from None
        self.created_ns = int(data.get("created_ns", self.created_ns))
        names = {f.name for f in dataclasses.fields(CellEntry)}
        cells = data.get("cells", {}) if isinstance(data, dict) else None
        if not isinstance(cells, dict) or not all(isinstance(raw, dict) for raw in cells.values()):
            raise UserError(f"{self.path} is damaged (its cells are not records); move it away to start afresh")
        for raw in cells.values():
            try:
                entry = CellEntry(**{k: v for k, v in raw.items() if k in names})
            except TypeError:
                raise UserError(f"{self.path} is damaged (a cell lacks its id); move it away to start afresh") from None
            for what, value in (("cell_id", entry.cell_id), ("run_id", entry.run_id)):
                if value is not None and not _one_name(value):
                    raise UserError(
                        f"{self.path}: cell {str(entry.cell_id)[:80]!r} names {what} {str(value)[:80]!r}, which is no "
                        "folder name (one path component, not `..`); the record is damaged or forged: move it away"
                    )
            self.cells[entry.cell_id] = entry

    def _check_plan(self) -> None:
        for cell in self.plan.cells:
            entry = self.cells.get(cell.cell_id)
            if entry is not None and entry.state != RUNNING and entry.fingerprint != cell.fingerprint():
                raise UserError(
                    f"cell {cell.cell_id} of campaign '{self.plan.name}' was run with other settings than the plan "
                    f"now gives it: give the plan another name (name = ...) or another --out"
                )

    def save(self) -> None:
        write_json_atomic(
            self.path,
            {
                "format_version": FORMAT_VERSION,
                "name": self.plan.name,
                "plan": str(self.plan.path),
                "out": str(self.out_dir),
                "created_ns": self.created_ns,
                "updated_ns": time.time_ns(),
                "cells_planned": len(self.plan.cells),
                "cells": {cid: dataclasses.asdict(e) for cid, e in self.cells.items()},
            },
        )

    # -- folders ---------------------------------------------------------------------------------

    def staging(self, cell_id: str) -> Path:
        return self.dir / "staging" / cell_id

    def log_path(self, cell_id: str, attempt: int) -> Path:
        return self.dir / "logs" / f"{cell_id}.{attempt}.log"

    @property
    def superseded_dir(self) -> Path:
        return self.dir / "superseded"

    def _supersede(self, folder: Path, why: str) -> str:
        target = self.superseded_dir / folder.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target = target.with_name(f"{folder.name}.{time.time_ns()}")
        os.replace(folder, target)
        return f"{why}: moved to {target.relative_to(self.dir)}"

    # -- state -----------------------------------------------------------------------------------

    def recover(self, kill: Any = None, keep: Any = None) -> list[str]:
        """Settles cells left `running` by a campaign that was killed; returns what it did, for the log.

        `kill(entry, staging)` ends a run process that outlived its campaign (the local runner passes one);
        cells for which `keep(entry)` is true are left running (a Slurm job still has them)."""
        notes = []
        for entry in self.cells.values():
            if entry.state != RUNNING or (keep is not None and keep(entry)):
                continue
            if kill is not None:
                kill(entry, self.staging(entry.cell_id))
            adopted = self._find_moved(entry)
            if adopted is not None:
                self._settle(entry, adopted)
                notes.append(f"{entry.cell_id}: its run {adopted.run_id} had ended; adopted")
                continue
            partial = self._staged_runs(entry.cell_id)
            finished = [p for p in partial if _read_marker(p.path).get("attempt") == entry.attempts]
            cell = self._cell(entry.cell_id)
            if finished and cell is not None:  # killed between marking the ended run and moving it
                self.finish(cell)
                notes.append(f"{entry.cell_id}: its run {finished[-1].run_id} had ended; adopted")
                continue
            what = [self._supersede(p.path, "cut short") for p in partial]
            entry.history.append(
                {"attempt": entry.attempts, "state": "interrupted", "runs": what, "ended_ns": time.time_ns()}
            )
            entry.state, entry.pid, entry.run_id = "interrupted", None, None
            notes.append(f"{entry.cell_id}: interrupted mid-run; will run again")
        self.save()
        return notes

    def todo(self, retry_failed: bool) -> list[Cell]:
        """The cells still to run, in plan order; failed ones only when asked to retry them."""
        out = []
        for cell in self.plan.cells:
            entry = self.cells.get(cell.cell_id)
            if entry is None or entry.state not in (OK, FAILED) or (entry.state == FAILED and retry_failed):
                out.append(cell)
        return out

    def begin(self, cell: Cell, pid: int | None = None, host: str | None = None) -> CellEntry:
        """Marks the cell running (on disk) and clears its staging folder; an earlier failed run of it
        leaves `<out>/` for `superseded/`."""
        entry = self.cells.get(cell.cell_id) or CellEntry(cell.cell_id, cell.fingerprint())
        self.cells[cell.cell_id] = entry
        if entry.run_id is not None and (self.out_dir / entry.run_id).exists():
            note = self._supersede(self.out_dir / entry.run_id, "retried")
            entry.history.append({"attempt": entry.attempts, "state": entry.state, "run_id": entry.run_id,
                                  "status": entry.status, "cause": entry.cause, "note": note,
                                  "job_id": entry.job_id})  # fmt: skip
        stage = self.staging(cell.cell_id)
        for leftover in self._staged_runs(cell.cell_id):
            self._supersede(leftover.path, "left in staging")
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        entry.state, entry.run_id, entry.status, entry.cause = RUNNING, None, None, ""
        entry.fingerprint = cell.fingerprint()
        entry.attempts += 1
        entry.host = host or socket.gethostname()
        entry.pid, entry.job_id = pid, None
        entry.started_ns, entry.ended_ns = time.time_ns(), None
        self.save()
        return entry

    def set_pid(self, cell_id: str, pid: int | None, host: str | None = None) -> None:
        entry = self.cells[cell_id]
        entry.pid = pid
        if host:
            entry.host = host
        self.save()

    def set_job(self, cell_id: str, job_id: str) -> None:
        self.cells[cell_id].job_id = job_id
        self.save()

    def job_running(self, cell_id: str, node: str) -> None:
        """Its Slurm job started on `node`: the cell's wall time counts from here, not from the queue."""
        entry = self.cells[cell_id]
        entry.host, entry.started_ns = node, time.time_ns()
        self.save()

    def requeue(self, cell: Cell, cause: str) -> CellEntry:
        """The cluster ended the cell's job before its run did (node failure, preemption, time limit, a
        scancel): files whatever run it left (to `superseded/` at the next `begin`) and marks the cell to be
        submitted again, keeping the reason in its history."""
        entry = self.finish(cell, cause)
        if entry.run_id is None:
            entry.history.append({"attempt": entry.attempts, "state": "requeued", "cause": cause,
                                  "job_id": entry.job_id, "ended_ns": entry.ended_ns})  # fmt: skip
        else:
            entry.cause = f"{cause} ({entry.cause})" if entry.cause else cause
        entry.state = REQUEUED
        entry.resubmits += 1
        self.save()
        return entry

    def cancelled(self, cell_id: str, cause: str) -> None:
        """The user cancelled the cell's job: it runs again at the next start, like an interrupted cell."""
        entry = self.cells[cell_id]
        entry.history.append({"attempt": entry.attempts, "state": "cancelled", "cause": cause,
                              "job_id": entry.job_id, "ended_ns": time.time_ns()})  # fmt: skip
        entry.state, entry.cause, entry.pid = "interrupted", cause, None
        self.save()

    def finish(self, cell: Cell, cause_if_no_run: str = "") -> CellEntry:
        """Moves the cell's staged run into `<out>/` and records how it ended. No run folder at all (the
        profile command refused, the node vanished) is a failure with `cause_if_no_run`."""
        entry = self.cells[cell.cell_id]
        staged = self._staged_runs(cell.cell_id)
        for extra in staged[:-1]:
            self._supersede(extra.path, "extra run in staging")
        if not staged:
            entry.state, entry.status, entry.cause = FAILED, None, cause_if_no_run or "no run folder was written"
            entry.ended_ns, entry.pid = time.time_ns(), None
            self.save()
            return entry
        folder = staged[-1]
        marker = {"campaign": self.plan.name, "cell_id": cell.cell_id, "attempt": entry.attempts}
        write_json_atomic(folder.path / MARKER, marker)
        target = self.out_dir / folder.run_id
        if target.exists():
            raise UserError(f"{target} exists already: cannot move the run of {cell.cell_id} there")
        shutil.move(str(folder.path), str(target))
        self._settle(entry, RunFolder(target))
        shutil.rmtree(self.staging(cell.cell_id), ignore_errors=True)
        return entry

    def _settle(self, entry: CellEntry, folder: RunFolder) -> None:
        try:
            record = folder.read_record()
            status, cause = record.outcome.status, record.outcome.cause
        except UserError as e:
            status, cause = RunStatus.FAILED, str(e)
        entry.run_id = folder.run_id
        entry.status = status.value
        entry.cause = cause
        entry.state = OK if status is RunStatus.OK else FAILED
        entry.ended_ns, entry.pid = time.time_ns(), None
        self.save()

    def _staged_runs(self, cell_id: str) -> list[RunFolder]:
        stage = self.staging(cell_id)
        if not stage.is_dir():
            return []
        return sorted((RunFolder(p) for p in stage.iterdir() if p.is_dir()), key=lambda f: f.run_id)

    def _find_moved(self, entry: CellEntry) -> RunFolder | None:
        for folder in list_runs(self.out_dir):
            marker = _read_marker(folder.path)
            if marker.get("campaign") == self.plan.name and marker.get("cell_id") == entry.cell_id:
                if marker.get("attempt") == entry.attempts:
                    return folder
        return None

    def _cell(self, cell_id: str) -> Cell | None:
        return next((c for c in self.plan.cells if c.cell_id == cell_id), None)

    # -- views -----------------------------------------------------------------------------------

    def entries(self) -> Iterable[CellEntry]:
        return (self.cells[c.cell_id] for c in self.plan.cells if c.cell_id in self.cells)

    def counts(self) -> dict[str, int]:
        out = {OK: 0, FAILED: 0, "todo": 0}
        for cell in self.plan.cells:
            state = self.cells[cell.cell_id].state if cell.cell_id in self.cells else "todo"
            out[state if state in (OK, FAILED) else "todo"] += 1
        return out

    def run_folders(self) -> list[RunFolder]:
        """This campaign's runs in `<out>/`, one per finished cell, in plan order."""
        out = []
        for entry in self.entries():
            if entry.run_id and (self.out_dir / entry.run_id / RUN_JSON).exists():
                out.append(RunFolder(self.out_dir / entry.run_id))
        return out


def _read_marker(path: Path) -> dict[str, Any]:
    try:
        data = json.loads((path / MARKER).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
