"""Issue 51, item 3: what was run is stored as what it is. A built-in run's workload is its spec; a command's
and an import's hold no model, dataset, batch or lr they never had, and say so ("not recorded")."""

from __future__ import annotations

import json
from pathlib import Path

from tracer.core.options import RunSpec, command_options
from tracer.core.records import RunRecord
from tracer.core.runfolder import RunFolder
from tracer.core.workload import (
    MEASURING_FIELDS,
    BuiltinWorkload,
    CommandWorkload,
    ImportedWorkload,
    Known,
    Measurement,
)

H200_COMMAND = "gpu-h200/20261127-155748-cmd-gpt_jax-21ab"  # a real `tracer profile -- python gpt_jax.py` run
DATA = Path(__file__).resolve().parents[2] / "data"


def test_a_measurement_holds_the_options_that_measure_a_command_too() -> None:
    """Declared once: the measuring options are RunSpec's `command=True` fields, in the same order."""
    assert MEASURING_FIELDS == command_options()
    spec = RunSpec("pytorch", "alexnet", "small", trace="nsys", sample_hz=20.0, pyspy=True)
    assert Measurement.of_spec(spec) == Measurement(
        "pytorch", "cpu", "nsys", sample_hz=20.0, timeout_s=None, stall_s=180.0, pyspy=True, nsys_sampling=False
    )
    assert Measurement.of_spec(spec, device="gpu").device == "gpu"


def test_each_workload_knows_only_what_it_recorded() -> None:
    spec = RunSpec("pytorch", "vgg16", "big", batch=100, epochs=3)
    assert Known.of(BuiltinWorkload(spec)) == Known("vgg16", "big", 100, 3)
    command = CommandWorkload(("python", "train.py", "--lr", "0.1"), "/w")
    assert Known.of(command) == Known("", "", None, None)
    assert command.label == "train.py --lr 0.1"
    imported = ImportedWorkload("/t/a.json.gz", "kineto", "resnet50")
    assert Known.of(imported) == Known("resnet50", "/t/a.json.gz", None, None)
    assert imported.not_recorded == ("batch", "epochs")
    assert ImportedWorkload("/t/a.json.gz", batch=32).not_recorded == ("epochs",)


def test_a_command_runs_record_has_no_model_dataset_batch_or_lr() -> None:
    """A real command run of the old layout reads as a command: its placeholder spec (model `unknown`, batch 1,
    lr 0.001) is gone, and what it writes back holds none of them."""
    record = RunFolder(DATA / H200_COMMAND).read_record()
    assert isinstance(record.workload, CommandWorkload) and record.spec is None
    assert record.workload.frameworks_imported == ("jax",) and record.measurement.framework == "jax"
    assert record.setting("batch") is None and record.setting("model") is None and record.setting("lr") is None
    assert record.setting("device") == "gpu" and record.setting("sample_hz") == 10.0
    written = record.to_json()
    assert written["workload"]["kind"] == "command" and "spec" not in written
    for placeholder in ("model", "dataset", "batch", "lr", "epochs"):
        assert placeholder not in written["workload"] and placeholder not in written["measurement"], placeholder
    assert RunRecord.from_json(json.loads(json.dumps(written))) == record
