"""Which runs are repeats of one another: runs of one spec (what was trained and how it was measured)
form a group, reported as the median and range of its runs (`tracer profile --repeat N` makes one)."""

from __future__ import annotations

import dataclasses
import json
from typing import Iterable

from tracer.core.records import RunRecord
from tracer.core.runfolder import RunFolder

# Spec fields that do not change what is measured: runs differing only there are repeats.
NOT_PART_OF_THE_EXPERIMENT = ("timeout_s",)


def repeat_key(record: RunRecord) -> str:
    spec = {k: v for k, v in dataclasses.asdict(record.spec).items() if k not in NOT_PART_OF_THE_EXPERIMENT}
    imported = record.knobs.get("imported_from")
    if imported:  # an imported trace is its own group: nothing says two imports measured the same thing
        spec["imported_from"] = imported
    return json.dumps(spec, sort_keys=True, default=str)


def group_repeats(folders: Iterable[RunFolder]) -> list[list[RunFolder]]:
    """Runs grouped by spec, groups in the order their first run was given, runs by id within a group."""
    groups: dict[str, list[RunFolder]] = {}
    for folder in folders:
        groups.setdefault(repeat_key(folder.read_record()), []).append(folder)
    return [sorted(g, key=lambda f: f.run_id) for g in groups.values()]
