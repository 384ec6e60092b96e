"""Issue 27, item 6: one damaged value never blinds a folder. Each reader checks a run folder against
the declared schemas at load (run.json with pydantic, sample tables against their Arrow schemas, each
event's kind and time): a run whose run.json is wrong is listed as damaged with the first reason, a
wrong table or event line is named once and skipped, and every other run reads as usual."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import run_tracer
from tracer.core.schema import EVENTS_FILE, RUN_JSON, SAMPLES_DIR

H100 = "gpu-h100/20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0"  # a real run: 3 epochs, GPU samples


def _parquet_with_strings(run: Path) -> Path:
    path = run / SAMPLES_DIR / "process.parquet"
    table = pq.read_table(path)
    strings = pa.table({name: pa.array(["x"] * table.num_rows) for name in table.column_names})
    pq.write_table(strings, path)
    return path


def _parquet_other_schema(run: Path) -> Path:
    path = run / SAMPLES_DIR / "gpu.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["u", "v"]}), path)
    return path


def _events_line(line: str) -> Callable[[Path], Path]:
    def damage(run: Path) -> Path:
        path = run / EVENTS_FILE
        lines = path.read_text().splitlines(keepends=True)
        lines.insert(2, line + "\n")  # among the first epoch's events
        path.write_text("".join(lines))
        return path

    return damage


def _record(edit: Callable[[dict], None]) -> Callable[[Path], Path]:
    def damage(run: Path) -> Path:
        path = run / RUN_JSON
        record = json.loads(path.read_text())
        edit(record)
        path.write_text(json.dumps(record))
        return path

    return damage


def _set(*keys_and_value: object) -> Callable[[dict], None]:
    *keys, value = keys_and_value

    def edit(record: dict) -> None:
        target = record
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return edit


def _strings_in_cost(record: dict) -> None:
    record["measurement_cost"] = {k: "lots" for k in ("sampler_cpu_s", "training_cpu_s", "wall_s")}


DAMAGES: dict[str, Callable[[Path], Path]] = {
    "parquet-strings": _parquet_with_strings,
    "parquet-schema": _parquet_other_schema,
    "events-t-inf": _events_line('{"kind": "epoch_start", "t_ns": Infinity, "epoch": 1}'),
    "events-t-1e308": _events_line('{"kind": "epoch_end", "t_ns": 1e308, "epoch": 1, "images": 1, "loss": 1}'),
    "events-deep": _events_line("[" * 100_000 + "]" * 100_000),
    "knobs-list": _record(_set("knobs", [1])),
    "framework-7": _record(_set("spec", "framework", 7)),
    "model-list": _record(_set("spec", "model", ["a"])),
    "start-string": _record(_set("wall_start_ns", "yesterday")),
    "batch-string": _record(_set("spec", "batch", "many")),
    "cost-strings": _record(_strings_in_cost),
}
RECORD_DAMAGES = [
    name for name in DAMAGES if name not in ("parquet-strings", "parquet-schema") and not name.startswith("events")
]


@pytest.fixture(scope="module")
def folder(
    real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, dict[str, tuple[str, Path]]]:
    """The real H100 run, and one copy of it per damage, in one runs folder."""
    out = tmp_path_factory.mktemp("damaged-values")
    good = real_fixtures / H100
    shutil.copytree(good, out / good.name)
    damaged = {}
    for name, how in DAMAGES.items():
        run_id = f"{good.name}-{name}"
        shutil.copytree(good, out / run_id)
        _record(_set("run_id", run_id))(out / run_id)
        damaged[name] = (run_id, how(out / run_id))
    return out, good.name, damaged


def _clean(result: object) -> str:
    text = result.stdout + result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in text, text[-3000:]
    return text


def test_runs_lists_each_damaged_run_with_its_first_reason(folder: tuple[Path, str, dict]) -> None:
    out, good, damaged = folder
    result = run_tracer("runs", "--runs", str(out))
    text = _clean(result)
    assert result.returncode == 0
    good_row = next(line for line in result.stdout.splitlines() if good + " " in line)
    assert "ok" in good_row and "3/3" in good_row, good_row
    for name in RECORD_DAMAGES:
        run_id, path = damaged[name]
        row = next(line for line in result.stdout.splitlines() if run_id in line)
        assert "damaged" in row, (name, row)
        assert result.stderr.count(str(path)) == 1, (name, result.stderr)
    assert "spec.framework" in text and "wall_start_ns" in text and "knobs" in text
    for name in ("parquet-strings", "events-t-inf"):  # read, with the damaged part named and skipped
        run_id, path = damaged[name]
        row = next(line for line in result.stdout.splitlines() if run_id in line)
        assert "ok" in row and "3/3" in row, (name, row)


def test_show_and_diagnose_name_the_damage_and_read_the_rest(folder: tuple[Path, str, dict]) -> None:
    out, _, damaged = folder
    for name, (run_id, path) in damaged.items():
        for command in ("show", "diagnose"):
            result = run_tracer(command, run_id, "--runs", str(out))
            _clean(result)
            # named once: on stderr, or (show, a damaged file of a readable run) under the summary's "Problems"
            said = result.stdout + result.stderr if command == "show" else result.stderr
            assert said.count(str(path)) == 1, (name, command, result.stdout, result.stderr)
            if name in RECORD_DAMAGES:  # nothing to show without the record: one line, exit 2
                assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, (name, result.stderr)
            else:
                assert result.returncode == 0, (name, command, result.stderr[-2000:])
                assert "vgg16" in result.stdout or command == "diagnose", (name, result.stdout)


def test_report_and_compare_of_the_whole_folder_skip_only_the_damaged(
    folder: tuple[Path, str, dict], tmp_path: Path
) -> None:
    out, good, damaged = folder
    result = run_tracer("report", str(out), "--out", str(tmp_path / "report"))
    _clean(result)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "report" / "index.html").exists()
    for name in RECORD_DAMAGES:
        assert result.stderr.count(str(damaged[name][1])) == 1, (name, result.stderr)
    result = run_tracer("compare", good, str(out), "--runs", str(out))
    _clean(result)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in RECORD_DAMAGES:
        assert damaged[name][0] not in result.stdout and str(damaged[name][1]) in result.stderr, name


def test_view_of_the_damaged_runs_shows_the_good_ones(folder: tuple[Path, str, dict], tmp_path: Path) -> None:
    pytest.importorskip("PySide6")
    out, good, damaged = folder
    shot = tmp_path / "view.png"
    picked = [damaged[name][0] for name in ("parquet-strings", "events-t-1e308", "knobs-list")]
    result = run_tracer("view", good, *picked, "--screenshot", str(shot), "--runs", str(out), timeout=240)
    _clean(result)
    assert result.returncode == 0, result.stderr[-3000:]
    assert shot.stat().st_size > 10_000
    assert str(damaged["knobs-list"][1]) in result.stderr


def test_view_of_a_folder_that_is_no_run_is_one_line(tmp_path: Path) -> None:
    result = run_tracer("view", "/", "--screenshot", str(tmp_path / "v.png"), timeout=120)
    _clean(result)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
