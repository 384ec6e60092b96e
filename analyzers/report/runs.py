"""Which runs a report covers, and how they group into cases.

A *case* is what the study compares frameworks on: one model on one dataset, on one device, at one
batch size. Every table row and every figure is about one case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from analyzers.run.run import IMPORTED, CaseKey, Run
from tracer.core.errors import UserError
from tracer.core.runfolder import list_runs
from tracer.core.schema import RUN_JSON

__all__ = ["IMPORTED", "CaseKey", "LoadedRun", "by_case", "collect_runs"]
LoadedRun = Run  # the report's name for a run: the one loaded form (analyzers.run)


def collect_runs(paths: Sequence[Path]) -> tuple[list[LoadedRun], list[str]]:
    """The runs named by `paths` (each a run folder or a folder of runs), and warnings for damaged
    runs found inside a folder of runs (skipped). A path that does not exist, a run folder named
    directly that cannot be read, or no runs at all is a `UserError`."""
    if not paths:
        raise UserError("no input: name run folders or folders of runs")
    runs: dict[Path, LoadedRun] = {}
    warnings: list[str] = []
    for path in paths:
        if not path.exists():
            raise UserError(f"{path} does not exist")
        if (path / RUN_JSON).exists():
            run = Run.open(path)
            run.read_record()
            runs[path.resolve()] = run
            continue
        if not path.is_dir():
            raise UserError(f"{path} is neither a run folder nor a folder of runs")
        found = list_runs(path)
        if not found:
            raise UserError(f"{path} holds no runs (no sub-folder has a {RUN_JSON})")
        for folder in found:
            run = Run.open(folder)
            try:
                run.read_record()
                runs[folder.path.resolve()] = run
            except (UserError, KeyError, TypeError, ValueError) as e:
                warnings.append(f"skipped {folder.path}: {e}")
    if not runs:
        raise UserError(f"no readable runs in {', '.join(map(str, paths))}")
    ordered = sorted(runs.values(), key=lambda r: (r.record.wall_start_ns, r.run_id))
    return ordered, warnings


def by_case(runs: Iterable[LoadedRun]) -> dict[CaseKey, list[LoadedRun]]:
    """Runs grouped by case, cases in the study's order; runs keep their order (oldest first)."""
    groups: dict[CaseKey, list[LoadedRun]] = {}
    for run in runs:
        groups.setdefault(run.case, []).append(run)
    return {key: groups[key] for key in sorted(groups, key=CaseKey.sort_key)}
