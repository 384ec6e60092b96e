"""The trace formats users already hold (issue 38): a rocpd database made from rocprof's published schema,
the nsys-jax archive's layout, XPlane files written by JAX's and TensorFlow's own profilers (read with
XProf's converter; their operator totals equal XProf's own), jax.profiler's Perfetto JSON; a folder;
detection by content with every refusal naming what it saw; and every importer sorting its rows
(nsys 2025.6 and later export them unordered), tested on shuffled rows."""

from __future__ import annotations

import gzip
import io
import json
import random
import shutil
import sqlite3
import subprocess
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.ingest.pipeline import ingest_file, trace_kind
from analyzers.summaries.operators import operator_summary
from analyzers.trace import tables as t
from tests.conftest import require_framework, run_tracer
from tracer.core import trace_formats as tf
from tracer.core.runfolder import RunFolder, list_runs
from tracer.measure.environments import env_python

# rocmProfileData's tables (rocpd_python/rocpd/schema), the columns a reader may rely on
ROCPD_SCHEMA = """
CREATE TABLE rocpd_string (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, string varchar(4096) NOT NULL);
CREATE TABLE rocpd_api (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, pid integer NOT NULL, tid integer NOT NULL,
  start integer NOT NULL, "end" integer NOT NULL, apiName_id bigint NOT NULL, args_id bigint NOT NULL);
CREATE TABLE rocpd_op (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, gpuId integer NOT NULL, queueId integer NOT NULL,
  sequenceId integer NOT NULL, completionSignal varchar(18) NOT NULL, start integer NOT NULL, "end" integer NOT NULL,
  description_id bigint NOT NULL, opType_id bigint NOT NULL);
CREATE TABLE rocpd_api_ops (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, api_id bigint NOT NULL,
  op_id bigint NOT NULL);
CREATE TABLE rocpd_copyapi (api_ptr_id bigint NOT NULL PRIMARY KEY, stream varchar(18) NOT NULL, size integer NOT NULL,
  width integer NOT NULL, height integer NOT NULL, kind integer NOT NULL, dst varchar(18) NOT NULL,
  src varchar(18) NOT NULL, dstDevice integer NOT NULL, srcDevice integer NOT NULL, sync bool NOT NULL,
  pinned bool NOT NULL);
CREATE TABLE rocpd_metadata (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, tag varchar(4096) NOT NULL,
  value varchar(4096) NOT NULL);
"""
KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>>(int)"


def _sorted(folder: RunFolder) -> None:
    for name in t.SCHEMAS:
        path = folder.table_path(name)
        if path.exists():
            starts = pq.read_table(path, columns=["start_ns"])["start_ns"].to_numpy()
            assert (starts[1:] >= starts[:-1]).all(), name


def _make_rpd(path: Path, steps: int, seed: int) -> dict[str, int]:
    """A rocpd database as rocprof writes one (HIP calls, the kernels and copies they launched, roctx
    ranges), rows inserted in shuffled order; returns the expected totals."""
    con = sqlite3.connect(path)
    con.executescript(ROCPD_SCHEMA)
    con.execute("INSERT INTO rocpd_metadata(tag, value) VALUES ('schema_version', '2')")
    words = ["", "hipLaunchKernel", "hipMemcpyAsync", "KernelExecution", "CopyHostToDevice", KERNEL, "UserMarker"]
    words += [f"step {i}" for i in range(steps)]
    con.executemany("INSERT INTO rocpd_string(id, string) VALUES (?, ?)", list(enumerate(words, start=1)))
    sid = {w: i for i, w in enumerate(words, start=1)}
    api, ops, links, copies = [], [], [], []
    for i in range(steps):
        base = 1_000_000 * (i + 1)
        api.append((10 * i + 1, 7, 8, base, base + 400_000, sid["UserMarker"], sid[f"step {i}"]))
        api.append((10 * i + 2, 7, 8, base + 1_000, base + 6_000, sid["hipLaunchKernel"], sid[""]))
        api.append((10 * i + 3, 7, 8, base + 7_000, base + 9_000, sid["hipMemcpyAsync"], sid[""]))
        ops.append((10 * i + 1, 0, 1, i, "0x0", base + 10_000, base + 110_000, sid[KERNEL], sid["KernelExecution"]))
        ops.append((10 * i + 2, 0, 2, i, "0x0", base + 120_000, base + 150_000, sid[""], sid["CopyHostToDevice"]))
        links += [(10 * i + 2, 10 * i + 1), (10 * i + 3, 10 * i + 2)]
        copies.append((10 * i + 3, "0x1", 4096, 0, 0, 1, "0x2", "0x3", 0, -1, 0, 1))
    rng = random.Random(seed)
    for rows in (api, ops, links, copies):
        rng.shuffle(rows)
    con.executemany("INSERT INTO rocpd_api VALUES (?, ?, ?, ?, ?, ?, ?)", api)
    con.executemany("INSERT INTO rocpd_op VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", ops)
    con.executemany("INSERT INTO rocpd_api_ops(api_id, op_id) VALUES (?, ?)", links)
    con.executemany("INSERT INTO rocpd_copyapi VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", copies)
    con.commit()
    con.close()
    return {"kernel_ns": steps * 100_000, "copy_ns": steps * 30_000, "launch_ns": steps * 5_000}


def test_a_rocpd_database_imports_as_hip(tmp_path: Path) -> None:
    rpd = tmp_path / "train.rpd"
    expected = _make_rpd(rpd, steps=5, seed=1)
    assert trace_kind(rpd) == tf.ROCPD
    done = run_tracer("import", str(rpd), "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    (run,) = list_runs(tmp_path / "runs")
    _sorted(run)
    report = run_tracer("analyze", str(run.path), "--format", "json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert data["api"] == "HIP"
    api = {r["name"]: r for r in data["cuda_api"]}
    assert api["hipLaunchKernel"]["calls"] == 5 and api["hipLaunchKernel"]["total_ns"] == expected["launch_ns"]
    (kernel,) = data["kernels"]
    assert kernel["total_ns"] == expected["kernel_ns"] and kernel["name"] == KERNEL
    (copy,) = data["memcpy"]
    assert copy["name"] == "[HIP memcpy Host-to-Device]" and copy["total_ns"] == expected["copy_ns"]
    corr = pq.read_table(run.table_path(t.KERNELS), columns=["correlation_id"])["correlation_id"].to_pylist()
    launches = pq.read_table(run.table_path(t.CUDA_API), columns=["correlation_id", "name"]).to_pylist()
    assert set(corr) <= {r["correlation_id"] for r in launches if r["name"] == "hipLaunchKernel"}


def _nsys_jax_rows(seed: int) -> tuple[pa.Table, dict[str, int]]:
    """The `nvtx_gpu_proj_trace` recipe's rows as nsys-jax archives them: a module range per step holding
    its thunks (each an XLA op), times in ns, rows shuffled."""
    rows, totals = [], {"convolution.3": 0, "fusion.12": 0}
    rid = 0
    for step in range(4):
        base = 10_000_000 * (step + 1)
        rid += 1
        module = rid
        rows.append(("TSL:XlaModule:#hlo_module=jit_train_step,program_id=7#", base, 2_000_000, module, None))
        for k, (op, dur) in enumerate((("convolution.3", 900_000), ("fusion.12", 300_000))):
            rid += 1
            rows.append((f"TSL:Thunk:#hlo_op={op}#", base + 100_000 + k * 1_000_000, dur, rid, module))
            totals[op] += dur
    random.Random(seed).shuffle(rows)
    names, starts, durs, ids, parents = zip(*rows)
    table = pa.table(
        {
            "Name": list(names),
            "Projected Start": pa.array(starts, pa.int64()),
            "Projected Duration": pa.array(durs, pa.int64()),
            "Orig Start": pa.array(starts, pa.int64()),
            "Orig Duration": pa.array(durs, pa.int64()),
            "RangeId": pa.array(ids, pa.int64()),
            "ParentId": pa.array(parents, pa.int64()),
            "PID": pa.array([11] * len(rows), pa.int64()),
            "TID": pa.array([12] * len(rows), pa.int64()),
            "Rank": pa.array([0] * len(rows), pa.int64()),
            "Style": ["" for _ in rows],
        }
    )
    return table, totals


def test_an_nsys_jax_archive_imports_its_thunks_as_operators(tmp_path: Path) -> None:
    table, totals = _nsys_jax_rows(seed=2)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    threads = io.BytesIO()
    pq.write_table(
        pa.table({"Name": ["XlaLauncher:#global=0,local=0,process=0,slice=0#"], "PID": [11], "TID": [12]}), threads
    )
    archive = tmp_path / "profile.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("profile/nvtx_gpu_proj_trace/trace.parquet", buf.getvalue())
        z.writestr("profile/thread-metadata.parquet", threads.getvalue())
        z.writestr("profile/report.nsys-rep", b"")
    assert trace_kind(archive) == tf.NSYS_JAX
    done = run_tracer("import", str(archive), "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    (run,) = list_runs(tmp_path / "runs")
    assert run.read_record().measurement.framework == "jax"
    _sorted(run)
    ops = {r.name: r for r in operator_summary(run)}
    assert {k: ops[k].total_ns for k in totals} == totals and ops["convolution.3"].calls == 4
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(archive) as z:
        z.extractall(unpacked)
    folder = RunFolder(tmp_path / "from-folder")
    folder.path.mkdir()
    ingest_file(unpacked / "profile", folder)
    assert {r.name: r.total_ns for r in operator_summary(folder)} == {r.name: r.total_ns for r in ops.values()}


PROFILES = {
    "jax": """
import sys, jax, jax.numpy as jnp
x = jnp.ones((8, 3, 32, 32)); w = jnp.ones((4, 3, 3, 3))
@jax.jit
def f(x, w):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME")
    return jnp.dot(y.reshape(8, -1), jnp.ones((4 * 32 * 32, 10))).sum()
f(x, w).block_until_ready()
with jax.profiler.trace(sys.argv[1], create_perfetto_trace=True):
    for _ in range(3):
        f(x, w).block_until_ready()
""",
    "tensorflow": """
import sys, tensorflow as tf
m = tf.keras.Sequential([tf.keras.layers.Input((32, 32, 3)), tf.keras.layers.Conv2D(4, 3), tf.keras.layers.Flatten(),
                         tf.keras.layers.Dense(10)])
m.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = tf.ones((8, 32, 32, 3)); y = tf.zeros((8,), tf.int32)
m.fit(x, y, epochs=1, verbose=0)
tf.profiler.experimental.start(sys.argv[1])
m.fit(x, y, epochs=2, verbose=0)
tf.profiler.experimental.stop()
""",
}


def _profile(framework: str, logdir: Path) -> Path:
    """A profile folder written by the framework's own profiler on the CPU (its XPlane inside)."""
    require_framework(framework)
    script = logdir.parent / f"{framework}_profile.py"
    script.write_text(PROFILES[framework])
    env = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [str(env_python(framework)), str(script), str(logdir)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return logdir


def _ops(path: Path, tmp: Path) -> dict[str, int]:
    folder = RunFolder(tmp / f"ops-{path.name}-{random.random()}")
    folder.path.mkdir()
    ingest_file(path, folder)
    _sorted(folder)
    return {r.name: r.total_ns for r in operator_summary(folder)}


def test_jax_profiles_import_from_xplane_and_perfetto_alike(tmp_path: Path) -> None:

    logdir = _profile("jax", tmp_path / "jaxlog")
    done = run_tracer("import", str(logdir), "--out", str(tmp_path / "runs"))  # the folder jax.profiler wrote
    assert done.returncode == 0, done.stderr
    assert "\n" not in done.stderr.strip(), done.stderr  # XProf's converter is quiet
    (run,) = list_runs(tmp_path / "runs")
    rows = operator_summary(run)
    assert rows[0].name.startswith(("convolution", "dot")), [r.name for r in rows]
    (xplane,) = logdir.rglob("*.xplane.pb")
    (perfetto,) = logdir.rglob("perfetto_trace.json.gz")
    assert trace_kind(perfetto) == tf.XPROF_JSON
    from_xplane = _ops(xplane, tmp_path)
    assert from_xplane == {r.name: r.total_ns for r in rows}
    assert _ops(perfetto, tmp_path) == from_xplane  # jax's own JSON, XProf's converter: one profile, one table
    assert viewer_op_totals(xplane) == from_xplane  # XProf's events, summed without our reader


def viewer_op_totals(xplane: Path) -> dict[str, int]:
    """Total ns per operator summed straight from XProf's trace-viewer events (XLA ops: `hlo_op`; TensorFlow
    ops: `long_name`, tf.data's iterators left out), without the operator table's reader."""
    from analyzers.ingest import xprof

    totals: dict[str, int] = {}
    for ev in json.loads(xprof.trace_viewer_json(xplane))["traceEvents"]:
        args = ev.get("args") or {}
        if ev.get("ph") == "X" and ("hlo_op" in args or "long_name" in args):
            if not ev["name"].startswith(xprof.INPUT_PIPELINE):
                totals[ev["name"]] = totals.get(ev["name"], 0) + round(ev["dur"] * 1000)
    return totals


def test_a_tensorflow_profile_has_xprofs_own_operator_totals(tmp_path: Path) -> None:
    from analyzers.ingest import xprof

    logdir = _profile("tensorflow", tmp_path / "tflog")
    (xplane,) = logdir.rglob("*.xplane.pb")
    ours = _ops(xplane, tmp_path)
    theirs = xprof.framework_op_stats(xplane)  # XProf's own "framework op stats" table
    assert set(ours) == set(theirs)
    assert all(abs(ours[k] - theirs[k] * 1000) <= 1 for k in ours), (ours, theirs)
    assert viewer_op_totals(xplane) == ours
    # the model's own ops are there (which one is largest is not asked: on a busy machine tf.data's `Range`
    # can outlast them)
    assert any("Conv2D" in k for k in ours) and any("MatMul" in k for k in ours), ours


def _refusal(path: Path, tmp: Path) -> str:
    done = run_tracer("import", str(path), "--out", str(tmp / "runs"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert not (tmp / "runs").exists() or not list_runs(tmp / "runs")
    return lines[0]


def test_each_refusal_names_the_format_it_saw(real_fixtures: Path, tmp_path: Path) -> None:
    # A .tar[.gz] of traces and a folder of several are not refused: they import as one run of several ranks
    # (tests/analyzers/figures/test_ranks.py).
    rpd_gz = tmp_path / "train.rpd.gz"
    _make_rpd(tmp_path / "plain.rpd", steps=1, seed=3)
    rpd_gz.write_bytes(gzip.compress((tmp_path / "plain.rpd").read_bytes()))
    other = tmp_path / "app.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (name TEXT)")
    con.close()
    some_zip = tmp_path / "photos.zip"
    with zipfile.ZipFile(some_zip, "w") as z:
        z.writestr("a.jpg", b"x")
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    cases = {
        rpd_gz: "a gzip-compressed SQLite database",
        other: "an SQLite database with tables users",
        some_zip: "a zip archive of 1 files (a.jpg)",
        empty_dir: "a folder with no trace",
        tmp_path / "missing": "no such file or folder",
    }
    for path, words in cases.items():
        line = _refusal(path, tmp_path / path.name)
        assert words in line, line


def test_a_folder_with_one_trace_imports_it(real_fixtures: Path, tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copyfile(real_fixtures / "hta/triton_example.json.gz", folder / "rank0.json.gz")
    (folder / "notes.txt").write_text("a run of ours")
    done = run_tracer("import", str(folder), "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "rank0.json.gz" in done.stdout


def _shuffled_sqlite(src: Path, out: Path, seed: int) -> None:
    """A copy of an nsys export whose event tables hold their rows in random order (as nsys 2025.6+ exports)."""
    shutil.copyfile(src, out)
    con = sqlite3.connect(out)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    rng = random.Random(seed)
    for name in tables:
        if not name.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "OSRT_API")):
            continue
        rows = con.execute(f'SELECT * FROM "{name}"').fetchall()
        if not rows:
            continue
        rng.shuffle(rows)
        con.execute(f'DELETE FROM "{name}"')
        con.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(rows[0]))})', rows)
    con.commit()
    con.close()


def _summaries(folder: RunFolder) -> tuple:
    from analyzers.summaries.cuda_api import api_summary
    from analyzers.summaries.kernels import kernel_summary, memcpy_summary

    return (api_summary(folder), kernel_summary(folder), memcpy_summary(folder), operator_summary(folder))


def _shuffled_kineto(src: Path, out: Path, seed: int) -> None:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    random.Random(seed).shuffle(doc["traceEvents"])
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))


def _shuffled_cupti(real_fixtures: Path, out: Path, seed: int) -> Path:
    """Our CUPTI batches (raw/cupti/records-*.parquet) made from a real CUPTI run's rows, shuffled."""
    run = real_fixtures / "gpu-h100/20261125-001502-pytorch-alexnet-big-gpu-b100-a266"
    records = []
    for row in pq.read_table(run / "cuda_api.parquet").to_pylist()[:3000]:
        records.append({"kind": row["kind"], "name": row["name"], "start_ns": row["start_ns"], "end_ns": row["end_ns"],
                        "pid": row["pid"], "tid": row["tid"], "correlation_id": row["correlation_id"]})  # fmt: skip
    for row in pq.read_table(run / "kernels.parquet").to_pylist()[:3000]:
        records.append({"kind": "kernel", "name": row["name"], "start_ns": row["start_ns"], "end_ns": row["end_ns"],
                        "device": row["device"], "stream": row["stream"],
                        "correlation_id": row["correlation_id"]})  # fmt: skip
    random.Random(seed).shuffle(records)
    cupti = out / "cupti"
    cupti.mkdir(parents=True)
    half = len(records) // 2
    for i, part in enumerate((records[:half], records[half:])):
        pq.write_table(pa.Table.from_pylist(part), cupti / f"records-{i:05d}.parquet")
    return cupti


def test_every_importer_sorts_shuffled_rows(real_fixtures: Path, tmp_path: Path) -> None:
    from tests.analyzers.ingest.test_nsys_arrow import _as_nsys_arrow

    cases: list[tuple[Path, Path]] = []
    nsys = real_fixtures / "nsys-ai/mfu_2gpu_before.sqlite"
    _shuffled_sqlite(nsys, tmp_path / "shuffled.sqlite", seed=4)
    cases.append((nsys, tmp_path / "shuffled.sqlite"))
    _as_nsys_arrow(tmp_path / "shuffled.sqlite", tmp_path / "shuffled.arrow")
    cases.append((nsys, tmp_path / "shuffled.arrow"))
    kineto = real_fixtures / "hta/benchmark_result_2869224_1695835535_trace.json.gz"
    _shuffled_kineto(kineto, tmp_path / "shuffled.json.gz", seed=5)
    cases.append((kineto, tmp_path / "shuffled.json.gz"))
    for original, shuffled in cases:
        a, b = RunFolder(tmp_path / f"a-{shuffled.name}"), RunFolder(tmp_path / f"b-{shuffled.name}")
        for folder, path in ((a, original), (b, shuffled)):
            folder.path.mkdir()
            ingest_file(path, folder)
            _sorted(folder)
        assert _summaries(a) == _summaries(b), shuffled.name
    cupti = RunFolder(tmp_path / "cupti-run")
    cupti.path.mkdir()
    ingest_file(_shuffled_cupti(real_fixtures, tmp_path / "cupti-src", seed=6), cupti)
    _sorted(cupti)
    assert pc.sum(pq.read_table(cupti.table_path(t.KERNELS))["dur_ns"]).as_py() > 0
    # rocpd, nsys-jax and XProf's JSON are shuffled in their own tests above (rows inserted out of order)
    xprof_json = tmp_path / "shuffled_perfetto_trace.json.gz"
    events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}}]
    events += [
        {"ph": "X", "pid": 1, "tid": 2, "ts": 10.0 * i, "dur": 5.0, "name": "dot.1", "args": {"hlo_op": "dot.1"}}
        for i in range(50)
    ]
    random.Random(7).shuffle(events)
    xprof_json.write_bytes(gzip.compress(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}).encode()))
    assert _ops(xprof_json, tmp_path) == {"dot.1": 50 * 5000}
