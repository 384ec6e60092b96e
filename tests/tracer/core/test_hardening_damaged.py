"""Issue 12, defect 1: one damaged run never blinds a folder. One good run plus one run damaged in each
way the issue lists, in one folder: every reader carries on with the good run and names the damaged
file, once."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder


def _damage(good: RunFolder, out: Path, name: str, how: Callable[[Path], Path]) -> tuple[str, Path]:
    """A copy of the good run named `<id>-NAME`, damaged by `how`, which returns the damaged file."""
    run_id = f"{good.run_id}-{name}"
    target = out / run_id
    shutil.copytree(good.path, target)
    record = json.loads((target / "run.json").read_text())
    record["run_id"] = run_id
    (target / "run.json").write_text(json.dumps(record))
    return run_id, how(target)


def _random_parquet(run: Path) -> Path:
    path = run / "samples" / "process.parquet"
    path.write_bytes(os.urandom(4096))
    return path


def _empty_parquet(run: Path) -> Path:
    path = run / "samples" / "process.parquet"
    path.write_bytes(b"")
    return path


def _garbage_csv(run: Path) -> Path:
    (run / "samples" / "process.parquet").unlink()
    path = run / "samples" / "process.csv"
    path.write_bytes(b't_ns,pid,cpu_pct\n"unterminated,1,2,3,4,5\n\x00\x01\x02,,,,\n')
    return path


def _events_not_utf8(run: Path) -> Path:
    path = run / "events.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage\x80\x81\n" + os.urandom(64).replace(b"\n", b"") + b"\n")
    return path


def _run_json_edit(key: str, value: object) -> Callable[[Path], Path]:
    def edit(run: Path) -> Path:
        path = run / "run.json"
        record = json.loads(path.read_text())
        if key == "outcome":
            record["outcome"] = value
        else:
            record["outcome"][key] = value
        path.write_text(json.dumps(record))
        return path

    return edit


DAMAGES: dict[str, Callable[[Path], Path]] = {
    "parquet-random": _random_parquet,
    "parquet-empty": _empty_parquet,
    "csv-garbage": _garbage_csv,
    "events-not-utf8": _events_not_utf8,
    "outcome-null": _run_json_edit("outcome", None),
    "status-42": _run_json_edit("status", 42),
}


@pytest.fixture(scope="module")
def damaged_folder(tiny_pytorch_run: RunFolder, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("damaged")
    shutil.copytree(tiny_pytorch_run.path, out / tiny_pytorch_run.run_id)
    good = RunFolder(out / tiny_pytorch_run.run_id)
    damaged = {name: _damage(good, out, name, how) for name, how in DAMAGES.items()}
    return out, {"good": good.run_id, **damaged}


def _no_traceback(result: object) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]  # type: ignore[attr-defined]


def test_runs_lists_the_good_run_and_names_each_damaged_file_once(damaged_folder: tuple[Path, dict]) -> None:
    out, runs = damaged_folder
    result = run_tracer("runs", "--runs", str(out))
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    text = result.stdout + result.stderr
    assert runs["good"] in text
    for name in DAMAGES:
        _, damaged_file = runs[name]
        assert text.count(str(damaged_file)) + text.count(damaged_file.name + " ") >= 1, (name, text)
        assert result.stderr.count(str(damaged_file)) <= 1, (name, result.stderr)


def test_report_skips_or_degrades_damaged_runs(damaged_folder: tuple[Path, dict], tmp_path: Path) -> None:
    out, runs = damaged_folder
    result = run_tracer("report", str(out), "--out", str(tmp_path / "report"))
    _no_traceback(result)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "report" / "index.html").exists() or list((tmp_path / "report").glob("*.html"))
    for name in ("outcome-null", "status-42"):
        assert str(runs[name][1]) in result.stderr, (name, result.stderr)
        assert result.stderr.count(str(runs[name][1])) == 1, result.stderr


@pytest.mark.parametrize("name", list(DAMAGES))
def test_show_compare_analyze_export_survive(damaged_folder: tuple[Path, dict], name: str, tmp_path: Path) -> None:
    out, runs = damaged_folder
    run_id, damaged_file = runs[name]
    unreadable_record = damaged_file.name == "run.json"
    for args in (
        ("show", run_id, "--runs", str(out)),
        ("compare", runs["good"], run_id, "--runs", str(out)),
        ("analyze", run_id, "--runs", str(out)),
        ("export-trace", run_id, str(tmp_path / "trace.json"), "--runs", str(out)),
    ):
        result = run_tracer(*args)
        _no_traceback(result)
        if args[0] == "show":  # it reads every file; the others only what they need (a CPU run has no CUDA tables)
            # a damaged table under the summary's "Problems"; a damaged run.json is the error itself
            assert str(damaged_file) in (result.stderr if unreadable_record else result.stdout), (args, result)
        assert result.stderr.count(str(damaged_file)) <= 1, (args, result.stderr)
        assert result.returncode in ((0, 2) if unreadable_record else (0,)), (args, result.stderr)


def test_view_screenshot_of_a_damaged_folder_does_not_hang(damaged_folder: tuple[Path, dict], tmp_path: Path) -> None:
    pytest.importorskip("PySide6")
    out, runs = damaged_folder
    shot = tmp_path / "view.png"
    paths = [str(out / runs["good"])] + [str(out / runs[name][0]) for name in DAMAGES]
    result = run_tracer("view", *paths, "--screenshot", str(shot), "--runs", str(out), timeout=240)
    _no_traceback(result)
    assert result.returncode == 0, result.stderr[-3000:]
    assert shot.stat().st_size > 10_000
