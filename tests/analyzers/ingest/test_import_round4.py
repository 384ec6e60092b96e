"""Issue 56, "Hardening, round four": foreign ranks told apart and imports bounded. Real `tracer import`
processes on real traces (the 8-rank DLRM Kineto files of PARAM, changed only where the defect needs it:
a rank moved a day later, times made relative), real archives, real links."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_tracer, tmpfs
from tracer.core.runfolder import list_runs

DAY_US = 86_400 * 10**6


def _dlrm(real_fixtures: Path, rank: int) -> Path:
    (path,) = (real_fixtures / "param-dlrm-8rank").glob(f"worker{rank}_*.json.gz")
    return path


def _rewritten(source: Path, target: Path, edit: Any) -> Path:
    """`source` (gzipped Kineto JSON) with `edit(trace)` applied, written gzipped to `target`."""
    trace = json.loads(gzip.decompress(source.read_bytes()))
    edit(trace)
    target.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return target


def _one_line(result: Any, *words: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def test_08_two_jobs_ranks_a_day_apart_are_not_one_run(real_fixtures: Path, tmp_path: Path) -> None:
    """Rank 0 of one job and rank 1 of a job a day later: refused (their spans never overlap), never merged
    into one run whose straggler is "late by 8.64e+07 ms"."""

    def later(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += DAY_US

    job_b = _rewritten(_dlrm(real_fixtures, 1), tmp_path / "jobB_rank1.pt.trace.json.gz", later)
    out = tmp_path / "runs"
    result = run_tracer("import", "--out", str(out), str(_dlrm(real_fixtures, 0)), str(job_b))
    _one_line(result, "never overlap", "not one job")
    assert not list_runs(out) if out.exists() else True
    same_job = run_tracer("import", "--out", str(out), str(_dlrm(real_fixtures, 0)), str(_dlrm(real_fixtures, 1)))
    assert same_job.returncode == 0, same_job.stderr[-2000:]


def test_09_one_kineto_file_with_relative_times_is_imported(real_fixtures: Path, tmp_path: Path) -> None:
    """One trace (HTA's Triton example: one GPU, no collective) whose times start at 0 and which has no
    baseTimeNanoseconds is one trace on its own clock: imported, not refused for ranks that do not fit
    on one clock."""

    def relative(trace: dict[str, Any]) -> None:
        first = min(e["ts"] for e in trace["traceEvents"] if isinstance(e.get("ts"), (int, float)))
        for e in trace["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] -= first
        trace.pop("baseTimeNanoseconds", None)

    source = real_fixtures / "hta" / "triton_example.json.gz"
    trace = _rewritten(source, tmp_path / "relative.pt.trace.json.gz", relative)
    result = run_tracer("import", "--out", str(tmp_path / "runs"), str(trace))
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = list_runs(tmp_path / "runs")
    assert pq.read_metadata(folder.table_path("kernels")).num_rows > 0


def test_13_a_multi_rank_import_rebuilt_from_raw_keeps_every_rank(real_fixtures: Path, tmp_path: Path) -> None:
    """The tables of a two-rank import deleted: rebuilt from raw/ (as `analyze` does, and as a read-only
    folder's are in the cache), they hold each rank's rows as the import wrote them, not one rank's."""
    out = tmp_path / "runs"
    result = run_tracer("import", "--out", str(out), str(_dlrm(real_fixtures, 0)), str(_dlrm(real_fixtures, 1)))
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = list_runs(out)
    imported = pq.read_table(folder.table_path("kernels"), columns=["rank"])["rank"].value_counts().to_pylist()
    assert len(imported) == 2
    for table in [*folder.path.glob("*.parquet"), folder.path / "trace_meta.json"]:
        table.unlink()
    analyzed = run_tracer("analyze", str(folder.path))
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    rebuilt = pq.read_table(folder.table_path("kernels"), columns=["rank"])["rank"].value_counts().to_pylist()
    assert sorted(rebuilt, key=str) == sorted(imported, key=str)


def _tar_of_ranks(real_fixtures: Path, tmp_path: Path) -> tuple[Path, int]:
    """A .tar.gz of two real ranks' traces, unpacked (as JSON) to `largest` bytes per member at most."""
    import tarfile

    archive, largest = tmp_path / "ranks.tar.gz", 0
    with tarfile.open(archive, "w:gz") as tar:
        for rank in (0, 1):
            member = tmp_path / f"rank{rank}.pt.trace.json"
            member.write_bytes(gzip.decompress(_dlrm(real_fixtures, rank).read_bytes()))
            largest = max(largest, member.stat().st_size)
            tar.add(member, arcname=member.name)
            member.unlink()
    return archive, largest


@pytest.mark.parametrize("bound", ["member", "archive"])
def test_12_an_archive_unpacking_past_its_bound_is_refused(
    bound: str, real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ranks' traces in a .tar.gz, with the bound on one member (or on the whole archive) lowered below
    what they unpack to: refused in one line naming the bound, no run made; with the bounds as declared the
    same archive imports."""
    archive, largest = _tar_of_ranks(real_fixtures, tmp_path)
    out = tmp_path / "runs"
    env = "TRACER_ARCHIVE_MEMBER_MAX_MIB" if bound == "member" else "TRACER_ARCHIVE_MAX_MIB"
    limit = largest / 2 if bound == "member" else largest * 1.5
    monkeypatch.setenv(env, str(limit / (1 << 20)))
    _one_line(run_tracer("import", "--out", str(out), str(archive)), env)
    assert not (out.exists() and list_runs(out))
    monkeypatch.delenv(env)
    assert run_tracer("import", "--out", str(out), str(archive)).returncode == 0


def test_12_an_nsys_jax_zip_member_is_streamed_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An nsys-jax archive whose recipe output unpacks past the bound on one member: refused in one line
    (it was read whole into memory, 6.4 GB for a 3 MB zip)."""
    import zipfile

    import pyarrow as pa

    rows = 200_000
    table = pa.table({"Name": ["XlaModule:#hlo_module=jit_step#"] * rows, "Projected Start": list(range(rows)),
                      "Projected Duration": [1] * rows, "PID": [1] * rows, "TID": [1] * rows})  # fmt: skip
    recipe = tmp_path / "trace.parquet"
    pq.write_table(table, recipe, compression="none", use_dictionary=False)
    archive = tmp_path / "profile.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(recipe, "profile/nvtx_gpu_proj_trace/trace.parquet")
    monkeypatch.setenv("TRACER_ARCHIVE_MEMBER_MAX_MIB", str(recipe.stat().st_size / 2 / (1 << 20)))
    _one_line(run_tracer("import", "--out", str(tmp_path / "runs"), str(archive)), "TRACER_ARCHIVE_MEMBER_MAX_MIB")
    monkeypatch.delenv("TRACER_ARCHIVE_MEMBER_MAX_MIB")
    done = run_tracer("import", "--out", str(tmp_path / "runs"), str(archive))
    assert done.returncode == 0, done.stderr[-2000:]


def _unpacked_nsys_jax(tmp_path: Path) -> Path:
    """An unpacked nsys-jax archive (the folder `tracer import` takes as a trace): its recipe output only."""
    import pyarrow as pa

    folder = tmp_path / "profile"
    (folder / "nvtx_gpu_proj_trace").mkdir(parents=True)
    names = ["XlaModule:#hlo_module=jit_step#", "Thunk:#hlo_op=fusion.1#"]
    columns = {"Name": names, "Projected Start": [10, 12], "Projected Duration": [50, 5], "PID": [1, 1], "TID": [1, 1]}
    table = pa.table(columns)
    pq.write_table(table, folder / "nvtx_gpu_proj_trace" / "trace.parquet")
    return folder


@pytest.mark.parametrize("link", ["outside-file", "root", "loop", "dangling"])
def test_11_links_out_of_an_imported_folder_are_refused(link: str, tmp_path: Path) -> None:
    """A link in an imported folder to a big file outside it, to `/`, round a loop, or to nothing: one
    line naming the link, nothing copied; without the link the folder imports."""
    folder = _unpacked_nsys_jax(tmp_path)
    outside = tmp_path / "big.bin"
    outside.write_bytes(b"\0" * (4 << 20))
    where = folder / "extra"
    targets = {"outside-file": str(outside), "root": "/", "loop": str(where), "dangling": str(tmp_path / "gone")}
    where.symlink_to(targets[link])
    out = tmp_path / "runs"
    line = _one_line(run_tracer("import", "--out", str(out), str(folder)), "extra")
    assert len(line) < 600, line
    assert not (out.exists() and list_runs(out))
    where.unlink()
    done = run_tracer("import", "--out", str(out), str(folder))
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = list_runs(out)
    assert sum(p.stat().st_size for p in run.raw_dir.rglob("*") if p.is_file()) < (1 << 20)


ROCPD_DAMAGE = {
    "null-time": "UPDATE rocpd_op SET start = NULL WHERE id = (SELECT min(id) FROM rocpd_op)",
    "text-time": "UPDATE rocpd_api SET \"end\" = 'soon' WHERE id = (SELECT min(id) FROM rocpd_api)",
    "overflow": 'UPDATE rocpd_op SET start = -9223372036854775807, "end" = 9223372036854775807 '
    "WHERE id = (SELECT min(id) FROM rocpd_op)",
    "text-gpu": "UPDATE rocpd_op SET gpuId = 'gpu0'",
    "binary-string": "UPDATE rocpd_string SET string = X'fffe00ff' WHERE string = 'hipLaunchKernel'",
    "binary-kernel-name": "UPDATE rocpd_string SET string = X'ff00' WHERE id = (SELECT description_id FROM rocpd_op "
    "WHERE description_id > 1 LIMIT 1)",
}


@pytest.mark.parametrize("damage", sorted(ROCPD_DAMAGE))
def test_10_a_damaged_rocpd_file_is_one_line(damage: str, tmp_path: Path) -> None:
    """A rocpd database (made as rocprof writes one) with one kind of damage: NULL or text times, times
    whose difference overflows, a text GPU id, binary strings. One line naming the file, never a traceback."""
    import sqlite3

    from tests.analyzers.ingest.test_imports import _make_rpd

    rpd = tmp_path / "train.rpd"
    _make_rpd(rpd, steps=3, seed=1)
    con = sqlite3.connect(rpd)
    for table in ("rocpd_op", "rocpd_api", "rocpd_string"):  # as a damaged copy may be: no NOT NULL left
        con.executescript(
            f"CREATE TABLE t AS SELECT * FROM {table}; DROP TABLE {table}; ALTER TABLE t RENAME TO {table};"
        )
    con.execute(ROCPD_DAMAGE[damage])
    con.commit()
    con.close()
    result = run_tracer("import", "--out", str(tmp_path / "runs"), str(rpd))
    if result.returncode == 0:  # a damage the reader can read around (a name it cannot decode) is no failure
        assert "Traceback" not in result.stderr
        return
    _one_line(result, str(rpd))


def _triton(real_fixtures: Path) -> dict[str, Any]:
    trace: dict[str, Any] = json.loads(gzip.decompress((real_fixtures / "hta" / "triton_example.json.gz").read_bytes()))
    return trace


@pytest.mark.parametrize(
    "case,words",
    [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32"), ("number-event", "not an event"),
     ("list-event", "Expected `object`"), ("rank-list", "distributedInfo's rank is [1]"),
     ("world-301-digits", "distributedInfo's world_size"), ("empty-xplane", "an empty file")],
)  # fmt: skip
def test_20_import_messages_name_the_problem(case: str, words: str, real_fixtures: Path, tmp_path: Path) -> None:
    """A real trace (HTA's Triton example) saved as UTF-16 or UTF-32, with an event that is no object, a
    rank that is a list, a 301-digit world size; a 0-byte .xplane.pb: each refused naming what is wrong
    (not "no traceEvents", "does not close", imported as rank 0, or imported as an `ok` run with no tables)."""
    trace = _triton(real_fixtures)
    path = tmp_path / "trace.json"
    if case.startswith("utf"):
        path.write_text(json.dumps(trace), encoding=case)
    elif case == "empty-xplane":
        path = tmp_path / "host.xplane.pb"
        path.write_bytes(b"")
    else:
        if case == "number-event":
            trace["traceEvents"].append(5)
        elif case == "list-event":
            trace["traceEvents"].insert(3, [1, 2])
        elif case == "rank-list":
            trace["distributedInfo"] = {"rank": [1], "world_size": 2}
        else:
            trace["distributedInfo"] = {"rank": 0, "world_size": int("9" * 301)}
        path.write_text(json.dumps(trace))
    out = tmp_path / "runs"
    _one_line(run_tracer("import", "--out", str(out), str(path)), words)
    assert not (out.exists() and list_runs(out))


def _analyze_file(trace: Path, cache: Path | str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TRACER_CACHE", str(cache))
    return run_tracer("analyze", str(trace))


def test_22_a_cache_linked_into_a_run_folder_is_refused(
    real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRACER_CACHE a link into a run folder: `analyze FILE` refuses in one line and writes nothing there."""
    trace = real_fixtures / "hta" / "triton_example.json.gz"
    out = tmp_path / "runs"
    assert run_tracer("import", "--out", str(out), str(trace)).returncode == 0
    (run,) = list_runs(out)
    before = sorted(p.relative_to(run.path) for p in run.path.rglob("*"))
    link = tmp_path / "cache"
    link.symlink_to(run.path)
    _one_line(_analyze_file(trace, link, monkeypatch), "lies inside the run folder")
    assert sorted(p.relative_to(run.path) for p in run.path.rglob("*")) == before


def test_22_a_cache_that_cannot_be_written_falls_back(
    real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache that cannot be made (a file where its folder should be, as a read-only home is for root)
    still analyses a Kineto file, from the system's temp space."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    result = _analyze_file(real_fixtures / "hta" / "triton_example.json.gz", blocker, monkeypatch)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_22_a_full_cache_is_named(real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache on a full tmpfs: one line naming the cache's path, not a bare "No space left on device"."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        with (disk / "filler").open("wb") as f:
            try:
                f.write(b"\0" * (1 << 20))
            except OSError:
                pass
        trace = real_fixtures / "kineto-h100" / "resnet50_bs100_train_torch2.11.json.gz"
        line = _one_line(_analyze_file(trace, disk / "cache", monkeypatch), "disk full")
        assert str(disk) in line and "TRACER_CACHE" in line


def test_22_cached_imports_are_evicted_past_their_bound(
    real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty finished imports already in the cache, then one more `analyze FILE`: the oldest used go,
    down to the declared bound, and the new one stays."""
    import os

    from analyzers.ingest.import_cache import DONE, IMPORTS_DIR, IMPORTS_KEPT

    imports = tmp_path / "cache" / IMPORTS_DIR
    for i in range(20):
        old = imports / f"old-{i:02d}"
        old.mkdir(parents=True)
        (old / DONE).write_text("{}")
        os.utime(old / DONE, (1_000_000 + i, 1_000_000 + i))
    result = _analyze_file(real_fixtures / "hta" / "triton_example.json.gz", tmp_path / "cache", monkeypatch)
    assert result.returncode == 0, result.stderr[-2000:]
    kept = sorted(p.name for p in imports.iterdir() if not p.name.startswith("."))
    assert len(kept) == IMPORTS_KEPT and any(name.startswith("triton_example") for name in kept)
    assert "old-00" not in kept and "old-19" in kept


PEAK_OF_CHILD = """\
import resource, subprocess, sys
result = subprocess.run([sys.executable, "-m", "tracer", *sys.argv[1:]], capture_output=True, text=True)
sys.stderr.write(result.stderr)
print(result.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""
"""`tracer ARGS` in a process of its own, then its exit status and peak memory (MiB) on stdout."""


def test_15_ten_30_mib_names_import_in_bounded_memory(real_fixtures: Path, tmp_path: Path) -> None:
    """A 0.3 MB gzip holding ten operators whose names are 30 MiB each (each event under the 32 MiB bound)
    held 1.5 GB at import: each name is now cut where it is read (`MAX_NAME_CHARS`, its length named) and
    one such event is decoded at a time, so the peak stays within twice a small trace's, whatever the count."""
    from analyzers.ingest.trace_events import MAX_NAME_CHARS

    trace = _triton(real_fixtures)
    (op,) = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"][:1]
    head, key, tail = json.dumps(trace).partition('"traceEvents": [')
    path = tmp_path / "names.json.gz"
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(head + key)
        for i in range(10):
            event = json.dumps({**op, "name": "@", "ts": op["ts"] + i})
            f.write(event.replace('"@"', f'"{chr(97 + i) * (30 << 20)}"') + ", ")
        f.write(tail)
    out = tmp_path / "runs"
    (tmp_path / "peak.py").write_text(PEAK_OF_CHILD)
    measured = subprocess.run(
        [sys.executable, str(tmp_path / "peak.py"), "import", "--out", str(out), str(path)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    code, peak_mib = map(int, measured.stdout.split())
    assert code == 0, measured.stderr[-2000:]
    assert peak_mib < 1024, f"import of ten 30 MiB names peaked at {peak_mib} MiB"
    (run,) = list_runs(out)
    names = pq.read_table(run.path / "operators.parquet", columns=["name"]).column("name").to_pylist()
    long = [n for n in names if len(n) > 1000]
    assert len(long) == 10 and all(len(n) < MAX_NAME_CHARS + 100 and "31,457,280 characters" in n for n in long)
