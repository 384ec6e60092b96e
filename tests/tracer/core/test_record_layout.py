"""run.json's first layout (one `spec` for every run, an import's origin in the knobs) opens unchanged, and
only the second is written: the real H100 and H200 run folders hold the first."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.options import RunSpec
from tracer.core.record_layout import FIRST_LAYOUT, current_layout
from tracer.core.records import RUN_FORMAT_VERSION, RunRecord, validate_record
from tracer.core.runfolder import RunFolder
from tracer.core.schema import RUN_JSON
from tracer.core.workload import BuiltinWorkload, ImportedWorkload, Measurement

H100 = "gpu-h100/20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0"


def _old(real_fixtures: Path) -> list[Path]:
    found = sorted((real_fixtures / "gpu-h100").glob("*/run.json"))
    assert len(found) >= 10
    return found


def test_the_old_fixtures_open_unchanged(real_fixtures: Path) -> None:
    """Every H100 run of the first layout reads as the built-in run it was: its spec field for field (options
    newer than the record at their defaults), measured as its spec says; the file is not rewritten."""
    for path in _old(real_fixtures):
        old = json.loads(path.read_text())
        assert old.get("format_version", FIRST_LAYOUT) == FIRST_LAYOUT and "workload" not in old
        record = RunFolder(path.parent).read_record()
        assert isinstance(record.workload, BuiltinWorkload)
        assert record.spec == RunSpec(**old["spec"]), path
        assert record.measurement == Measurement.of_spec(record.spec), path
        read = validate_record(old)  # as stored (the folder's reader may read an `ok` as diverged from its events)
        assert isinstance(read, RunRecord) and read.workload == record.workload
        assert (read.run_id, read.outcome.status.value, read.knobs) == (
            old["run_id"],
            old["outcome"]["status"],
            old["knobs"],
        )


def test_show_and_compare_of_old_folders_read_them_as_they_were(real_fixtures: Path) -> None:
    run = real_fixtures / H100
    before = hashlib.sha256((run / RUN_JSON).read_bytes()).hexdigest()
    shown = run_tracer("show", str(run))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "vgg16" in shown.stdout and any(line.split()[:2] == ["batch", "100"] for line in shown.stdout.splitlines())
    assert hashlib.sha256((run / RUN_JSON).read_bytes()).hexdigest() == before


def test_only_the_second_layout_is_written(real_fixtures: Path, tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    shutil.copytree(real_fixtures / H100, folder.path)
    record = folder.read_record()
    folder.write_record(record)
    written = json.loads(folder.run_json.read_text())
    assert written["format_version"] == RUN_FORMAT_VERSION == 2
    assert "spec" not in written and "command" not in written
    assert written["workload"]["kind"] == "builtin" and written["workload"]["spec"]["batch"] == 100
    assert written["measurement"]["framework"] == "pytorch" and written["measurement"]["device"] == "gpu"
    assert folder.read_record() == record
    assert current_layout(written) == written  # the second layout passes as it is


def test_an_old_import_keeps_its_recorded_batch_and_drops_the_placeholder(real_fixtures: Path) -> None:
    """A first-layout import (as `tracer import` wrote it: a spec of labels, its origin in the knobs) reads as
    an imported trace; batch 1 of a trace that recorded none is not carried over."""
    old = json.loads((real_fixtures / H100 / RUN_JSON).read_text())
    clock = json.dumps({"clock": "unix_ns", "offset_ns": 5, "alignment": "ProfilerStep"})
    old["spec"] = dict(framework="pytorch", model="unknown", dataset="t.json.gz", device="gpu", trace="torch")
    old["knobs"] = {"imported_from": "/x/t.json.gz", "not_recorded": ["batch", "epochs"], "clock": clock}
    record = validate_record(old)
    assert isinstance(record, RunRecord) and isinstance(record.workload, ImportedWorkload)
    assert record.workload.batch is None and record.workload.source == "/x/t.json.gz" and record.spec is None
    assert (record.workload.clock.kind, record.workload.clock.offset_ns) == ("unix_ns", 5)
    assert record.workload.clock.alignment == "ProfilerStep" and record.knobs == {}
    assert record.measurement == Measurement("pytorch", "gpu", "torch", sample_hz=0.0, timeout_s=None, stall_s=None)
    old["spec"]["batch"], old["knobs"]["not_recorded"] = 32, ["epochs"]
    again = validate_record(old)
    assert isinstance(again, RunRecord) and again.imported is not None and again.imported.batch == 32


@pytest.mark.parametrize(("field", "value"), [("batch", "many"), ("framework", 7), ("batch", 0)])
def test_a_damaged_old_spec_is_named_as_the_workloads(real_fixtures: Path, field: str, value: object) -> None:
    old = json.loads((real_fixtures / H100 / RUN_JSON).read_text())
    old["spec"][field] = value
    why = validate_record(old)
    assert isinstance(why, str) and why.startswith(f"workload.spec.{field}"), why


def test_a_record_round_trips_through_json() -> None:
    spec = RunSpec("jax", "alexnet", "big", device="gpu", batch=100)
    from tracer.core.records import EnvironmentInfo, Outcome, RunStatus

    record = RunRecord.built_in("r", spec, EnvironmentInfo("h", "l", "c", 1, 1, 1.0, "3"), Outcome(RunStatus.OK), 1)
    assert RunRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert dataclasses.replace(record, run_id="s").run_id == "s"
