"""Issue 51, item 3: a command run (`tracer profile -- COMMAND`) is stored as the command it is: its argv,
where it ran and what its script held, measured as asked, with no model, dataset, batch or lr of ours."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs
from tracer.core.workload import CommandWorkload


def test_a_command_runs_record_holds_the_command_and_no_made_up_setting(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    out = tmp_path / "runs"
    result = run_tracer(
        "profile", "--out", str(out), "--sample-hz", "20", "--", sys.executable, str(script), "--lr", "1"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = list_runs(out)
    stored = json.loads(folder.run_json.read_text())
    assert stored["format_version"] == 2 and "spec" not in stored and "command" not in stored
    workload, measured = stored["workload"], stored["measurement"]
    assert workload["kind"] == "command" and workload["argv"][1:] == [str(script), "--lr", "1"]
    assert len(workload["script_digest"]) == 16
    for made_up in ("model", "dataset", "batch", "lr", "epochs", "image_size"):
        assert made_up not in workload and made_up not in measured, made_up
    assert measured["sample_hz"] == 20 and measured["trace"] == "none"
    record = folder.read_record()
    assert isinstance(record.workload, CommandWorkload) and record.spec is None
    assert record.setting("batch") is None and record.setting("lr") is None
    shown = run_tracer("show", str(folder.path)).stdout
    assert "the script's own (not recorded)" in shown and "batch 1" not in shown
