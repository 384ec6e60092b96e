"""Helpers for campaign tests: tiny plans written to a temp folder and `tracer campaign` as a child process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tracer.core.records import RunStatus
from tracer.core.runfolder import RunFolder, list_runs

KNOBS = "[knobs]\nlimit = 8\nimage_size = 64\n"

# 2 "frameworks" x 2 models of the cheapest kind: PyTorch twice (batch 1 and 2) keeps the slow-to-import
# frameworks out of the tests that kill, fail and distribute; test_local runs the real 2-framework plan.
TINY_PYTORCH = (
    'name = "tiny"\nframeworks = ["pytorch"]\nmodels = ["alexnet", "mobilenet_v2"]\ndatasets = ["small"]\n'
    "batches = [1, 2]\nepochs = 1\n" + KNOBS
)
TINY_TWO_FRAMEWORKS = (
    'name = "tiny2"\nframeworks = ["pytorch", "tensorflow"]\nmodels = ["alexnet"]\n'
    'datasets = ["small"]\nepochs = 1\n' + KNOBS
)


def write_plan(folder: Path, text: str, name: str = "plan.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def campaign_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracer", "campaign", *args]


def run_campaign(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(campaign_command(*args), capture_output=True, text=True, timeout=timeout)


def record(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / "campaigns" / name / "campaign.json").read_text())  # type: ignore[no-any-return]


def runs_by_cell(out: Path) -> dict[str, list[RunFolder]]:
    """Run folders in `out` grouped by the campaign cell their marker names."""
    groups: dict[str, list[RunFolder]] = {}
    for folder in list_runs(out):
        marker = json.loads((folder.path / "campaign_cell.json").read_text())
        groups.setdefault(marker["cell_id"], []).append(folder)
    return groups


def assert_one_ok_run_per_cell(out: Path, name: str, cells: int) -> None:
    rec = record(out, name)
    groups = runs_by_cell(out)
    assert len(list_runs(out)) == cells, [f.run_id for f in list_runs(out)]
    assert set(groups) == set(rec["cells"]) and len(groups) == cells
    for cell_id, folders in groups.items():
        assert len(folders) == 1, (cell_id, folders)
        entry = rec["cells"][cell_id]
        assert entry["state"] == "ok" and entry["run_id"] == folders[0].run_id
        assert folders[0].read_record().outcome.status is RunStatus.OK
        assert not any((out / "campaigns" / name / "staging" / cell_id).glob("*/run.json"))
