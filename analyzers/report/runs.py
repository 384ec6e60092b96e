"""Which runs a report covers, and how they group into cases.

A *case* is what the study compares frameworks on: one model on one dataset, on one device, at one
batch size. Every table row and every figure is about one case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from tracer.core.cases import CASES, dataset_label
from tracer.core.errors import UserError
from tracer.core.records import RunRecord, RunStatus
from tracer.core.runfolder import RunFolder, list_runs
from tracer.core.schema import RUN_JSON

IMPORTED = "imported"  # the device of a case made by `tracer import`: what ran where is unknown


@dataclass(frozen=True, order=True)
class CaseKey:
    model: str
    dataset: str
    device: str
    batch: int

    @property
    def imported(self) -> bool:
        return self.device == IMPORTED

    @property
    def name(self) -> str:
        """The study's case name where the model and dataset are one of its cases, else `model/dataset`."""
        for case in CASES.values():
            if (case.model, case.dataset) == (self.model, self.dataset):
                return case.name
        return f"{self.model}/{self.dataset}"

    @property
    def title(self) -> str:
        if self.imported:
            return f"imported trace {self.dataset}"
        what = f"{self.model} on {self.dataset}"
        head = what if self.name == f"{self.model}/{self.dataset}" else f"{self.name} ({what})"
        return f"{head}, {self.device.upper()}, batch {self.batch}"

    @property
    def slug(self) -> str:
        raw = f"{self.name}-{self.device}" + ("" if self.imported else f"-b{self.batch}")
        return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in raw)

    def sort_key(self) -> tuple[int, str, str, int]:
        """The study's cases first, in the study's order (SimpleBig, ComplexSmall), CPU before GPU."""
        names = list(CASES)
        rank = names.index(self.name) if self.name in names else len(names)
        return (rank, self.name, self.device, self.batch)


@dataclass(frozen=True)
class LoadedRun:
    folder: RunFolder
    record: RunRecord

    @property
    def framework(self) -> str:
        return self.record.spec.framework

    @property
    def ok(self) -> bool:
        return self.record.outcome.status is RunStatus.OK

    @property
    def case(self) -> CaseKey:
        spec = self.record.spec
        if self.record.imported is not None:
            return CaseKey(spec.model, dataset_label(spec.dataset), IMPORTED, 0)
        return CaseKey(spec.model, dataset_label(spec.dataset), spec.device, spec.batch)


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
            folder = RunFolder(path)
            runs[path.resolve()] = LoadedRun(folder, folder.read_record())
            continue
        if not path.is_dir():
            raise UserError(f"{path} is neither a run folder nor a folder of runs")
        found = list_runs(path)
        if not found:
            raise UserError(f"{path} holds no runs (no sub-folder has a {RUN_JSON})")
        for folder in found:
            try:
                runs[folder.path.resolve()] = LoadedRun(folder, folder.read_record())
            except (UserError, KeyError, TypeError, ValueError) as e:
                warnings.append(f"skipped {folder.path}: {e}")
    if not runs:
        raise UserError(f"no readable runs in {', '.join(map(str, paths))}")
    ordered = sorted(runs.values(), key=lambda r: (r.record.wall_start_ns, r.folder.run_id))
    return ordered, warnings


def by_case(runs: Iterable[LoadedRun]) -> dict[CaseKey, list[LoadedRun]]:
    """Runs grouped by case, cases in the study's order; runs keep their order (oldest first)."""
    groups: dict[CaseKey, list[LoadedRun]] = {}
    for run in runs:
        groups.setdefault(run.case, []).append(run)
    return {key: groups[key] for key in sorted(groups, key=CaseKey.sort_key)}


def latest_per_framework(runs: Iterable[LoadedRun]) -> dict[str, LoadedRun]:
    """One run per framework for a figure: the newest that finished, else the newest of any status."""
    chosen: dict[str, LoadedRun] = {}
    for run in runs:
        current = chosen.get(run.framework)
        if current is None or run.ok or not current.ok:
            chosen[run.framework] = run
    return chosen
