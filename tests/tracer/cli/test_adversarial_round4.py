"""Issue 56, "Hardening, round four": the CLI-level defects, one test each, through real `tracer` processes
on real run folders (a command run made here by `tracer profile -- COMMAND`, edited where a defect needs it)."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs

ESCAPE_ARG = "\x1b[31mRED\x1b]0;title\x07\nsecond line\x07"


@pytest.fixture(scope="module")
def command_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished command run whose argv holds a terminal escape sequence, a bell and a newline."""
    out = tmp_path_factory.mktemp("round4") / "runs"
    result = run_tracer("profile", "--out", str(out), "--", sys.executable, "-c", "import sys", ESCAPE_ARG)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout + result.stderr
    (folder,) = list_runs(out)
    return folder.path


def _copy(run: Path, root: Path, name: str) -> Path:
    target = root / name
    shutil.copytree(run, target)
    return target


def test_15_campaign_dry_run_with_a_symlink_loop_out_is_one_line(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('name = "p"\nframeworks = ["pytorch"]\nmodels = ["alexnet"]\ndatasets = ["small"]\n')
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for out in (loop, loop / "sub"):
        result = run_tracer("campaign", str(plan), "--dry-run", "--out", str(out))
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert "symlink loop" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_15_a_running_run_whose_recorded_pid_is_1_is_abandoned(command_run: Path, tmp_path: Path) -> None:
    """pid 1 (the machine's init, alive and older than every run) is no tracer of ours."""
    run = _copy(command_run, tmp_path, "pid-one")
    record = json.loads((run / "run.json").read_text())
    record["outcome"] = {"status": "running"}
    record["tracer_pid"], record["wall_end_ns"] = 1, None
    record["environment"]["hostname"] = socket.gethostname()
    (run / "run.json").write_text(json.dumps(record))
    shown = run_tracer("show", str(run))
    assert shown.returncode == 0, shown.stderr
    assert "abandoned" in shown.stdout, shown.stdout


@pytest.mark.parametrize("command", ["show", "runs", "compare"])
def test_16_a_commands_argv_is_shown_without_control_characters(
    command: str, command_run: Path, tmp_path: Path
) -> None:
    args = {"show": [str(command_run)], "runs": ["--runs", str(command_run.parent)],
            "compare": [str(command_run), str(command_run)]}[command]  # fmt: skip
    result = run_tracer(command, *args)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    shown = result.stdout + result.stderr
    assert "\x1b" not in shown and "\x07" not in shown, repr(shown[-2000:])
    if command == "show":
        assert "RED\\nsecond line" in shown, shown


@pytest.fixture(scope="module")
def two_marked_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two real runs of examples/marker_loop.py (steps and epochs from the marker), to diff."""
    out = tmp_path_factory.mktemp("round4-diff") / "runs"
    script = Path(__file__).resolve().parents[3] / "examples" / "marker_loop.py"
    for _ in range(2):
        result = run_tracer("profile", "--out", str(out), "--", sys.executable, str(script), "--items", "2048",
                            "--epochs", "3")  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
    a, b = (f.path for f in list_runs(out))
    return a, b


def _damaged_steps(run: Path, column: str, value: float) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = run / "samples" / "steps.parquet"
    table = pq.read_table(path)
    values = table[column].to_pylist()
    values[len(values) // 2] = value
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type)),
                   path)  # fmt: skip


@pytest.mark.parametrize(("column", "value"), [("compute_s", float("nan")), ("sync_s", -5.0), ("images", -256)])
def test_21_diff_of_a_run_with_a_damaged_steps_table_is_refused(
    column: str, value: float, two_marked_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = two_marked_runs
    assert run_tracer("diff", str(a), str(b)).returncode == 0
    damaged = _copy(b, tmp_path, "damaged")
    _damaged_steps(damaged, column, value)
    result = run_tracer("diff", str(a), str(damaged))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "same time" not in result.stdout
    assert "steps table is damaged" in result.stderr


def test_21_diff_of_a_running_run_says_it_is_running(two_marked_runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_marked_runs
    running = _copy(b, tmp_path, "running")
    record = json.loads((running / "run.json").read_text())
    record["outcome"] = {"status": "running"}
    record["wall_end_ns"] = None
    (running / "run.json").write_text(json.dumps(record))
    result = run_tracer("diff", str(a), str(running))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "cut short" not in result.stderr and "still says running" in result.stderr, result.stderr


@pytest.mark.parametrize("table", ["nvtx", "operators", "kernels"])
def test_15_export_trace_of_ranks_with_a_damaged_table_skips_it(
    table: str, real_fixtures: Path, tmp_path: Path
) -> None:
    """Two real ranks (PARAM's DLRM) imported, one table then damaged: export-trace (which reads each rank
    as an in-memory view of the run, `Run.rank`) names the damaged table once and writes the rest, never a
    traceback."""
    ranks = sorted((real_fixtures / "param-dlrm-8rank").glob("worker[01]_*.json.gz"))
    out = tmp_path / "runs"
    assert run_tracer("import", "--out", str(out), *map(str, ranks)).returncode == 0
    (run,) = list_runs(out)
    (run.path / f"{table}.parquet").write_bytes(b"not parquet")
    result = run_tracer("export-trace", str(run.path), str(tmp_path / "trace.json"))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"{table}.parquet is damaged" in result.stderr
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"]


def test_23_copied_runs_are_known_by_their_folders_names(command_run: Path, tmp_path: Path) -> None:
    """Two copies of one run under other names: `show` and `compare` call each by its folder's name (two
    folders, two names), never both by the id in their run.json."""
    one, two = _copy(command_run, tmp_path, "copy-one"), _copy(command_run, tmp_path, "copy-two")
    shown = run_tracer("show", str(two))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.splitlines()[0].split()[-1] == "copy-two"
    compared = run_tracer("compare", str(one), str(two))
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert "copy-one" in compared.stdout and "copy-two" in compared.stdout
    assert command_run.name not in compared.stdout


def test_23_a_runs_folder_that_loops_and_a_looping_run_json_are_named(command_run: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = run_tracer("runs", "--runs", str(loop))
    assert result.returncode == 2 and "symlink loop" in result.stderr and "no runs" not in result.stderr
    runs = tmp_path / "runs"
    (runs / "selfloop").mkdir(parents=True)
    (runs / "selfloop" / "run.json").symlink_to("run.json")
    _copy(command_run, runs, "fine")
    listed = run_tracer("runs", "--runs", str(runs))
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "selfloop" in listed.stdout and "fine" in listed.stdout
    assert "damaged" in listed.stdout + listed.stderr


@pytest.mark.parametrize("inside", ["", "rep"])
def test_15_report_into_a_users_dataset_folder_is_refused(inside: str, real_fixtures: Path, tmp_path: Path) -> None:
    """A user's dataset no run here has trained from (one sub-folder per class, each holding images):
    `report --out` it, or a folder in it (a class with no images), is one line and writes nothing there."""
    from PIL import Image

    dataset = tmp_path / "photos"
    for cls in ("cats", "dogs"):
        (dataset / cls).mkdir(parents=True)
        Image.new("RGB", (32, 32)).save(dataset / cls / "0.jpg")
    before = sorted(p.relative_to(dataset) for p in dataset.rglob("*"))
    out = tmp_path / "runs"
    trace = real_fixtures / "hta" / "triton_example.json.gz"
    assert run_tracer("import", "--out", str(out), str(trace)).returncode == 0
    result = run_tracer("report", str(out), "--out", str(dataset / inside))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "dataset" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert sorted(p.relative_to(dataset) for p in dataset.rglob("*")) == before
