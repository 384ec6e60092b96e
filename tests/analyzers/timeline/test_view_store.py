"""A run's stored view (`analyzers.timeline.view_store`) on the H100 nsys run laid end to end (three copies, about
400 k events): written by the ingest for a big trace and not for a small one, read back memory-mapped and
equal to a fresh build, rebuilt when a table changed or the store is damaged, and kept in the cache
where the run folder is read-only."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from analyzers.ingest import threads
from analyzers.timeline import view_store
from analyzers.trace import tables as t
from tests.analyzers.run_replica import replicate_run
from tracer.core.runfolder import RunFolder

COPIES_EVENTS = 300_000  # trace rows asked for: three copies of the 110 k-row run


@pytest.fixture(scope="module")
def replica(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    source = real_fixtures / "gpu-h100" / "20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"
    return RunFolder(replicate_run(tmp_path_factory.mktemp("replica"), COPIES_EVENTS, source))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRACER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same(a: object, b: object) -> None:
    """Two views' records hold equal values, field by field (arrays by value, of any integer width)."""
    assert type(a) is type(b)
    if a is None:
        return
    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y), f.name
        elif isinstance(x, tuple) and x and isinstance(x[0], np.ndarray):
            assert len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)), f.name
        else:
            assert x == y, f.name


def test_stored_view_reads_back_as_built(replica: RunFolder, cache: Path) -> None:
    built = view_store.build(replica)
    assert built.events >= view_store.STORE_MIN_EVENTS
    place = view_store.write(replica, built)  # (DuckDB's parallel sums may differ in the last bit between builds)
    assert place == replica.path / view_store.VIEW_DIR and (place / view_store.MANIFEST).exists()
    stored = view_store.load(replica)
    assert stored.stored == place
    for name in view_store.LANE_SETS:
        _same(getattr(built.lanes, name), getattr(stored.lanes, name))
    assert built.indexes.keys() == stored.indexes.keys() == {"threads", "calls", "gpu"}
    for name in built.indexes:
        _same(built.indexes[name], stored.indexes[name])
    assert stored.api_phases == built.api_phases and "epoch 6" in stored.api_phases  # the third copy's epochs
    assert stored.kernels == built.kernels and stored.api_label == "CUDA API"
    assert isinstance(stored.lanes.api_calls.start_ns, np.memmap)  # type: ignore[union-attr]
    lanes = stored.indexes["threads"]
    assert lanes.pyramid and isinstance(lanes.pyramid[0], np.memmap)
    assert stored.lanes.threads.lane.dtype.itemsize < 8  # type: ignore[union-attr]  # narrow codes and lanes
    for name, index in stored.indexes.items():  # what is drawn from the store is what a fresh build draws
        for view in ((index.span[0], index.span[1]), (30.0, 31.0)):
            assert np.array_equal(index.raster(*view, 1500), built.indexes[name].raster(*view, 1500)), name


def test_the_ingest_stores_a_big_traces_view(replica: RunFolder, cache: Path) -> None:
    import shutil

    from analyzers.ingest.pipeline import ingest_run

    shutil.rmtree(replica.path / view_store.VIEW_DIR, ignore_errors=True)
    ingest_run(replica)  # (no raw trace left to read: the thread timeline and the view)
    assert view_store.load(replica).stored == replica.path / view_store.VIEW_DIR


def test_a_changed_table_or_a_damaged_store_is_rebuilt(replica: RunFolder, cache: Path) -> None:
    assert view_store.store_if_big(replica) == replica.path / view_store.VIEW_DIR
    manifest = replica.path / view_store.VIEW_DIR / view_store.MANIFEST
    before = manifest.stat().st_mtime_ns
    assert view_store.load(replica).stored == manifest.parent and manifest.stat().st_mtime_ns == before
    threads.write(replica)  # the ingest wrote the thread timeline again: its mtime changed
    again = view_store.load(replica)
    assert again.stored == manifest.parent and manifest.stat().st_mtime_ns != before
    manifest.write_text(manifest.read_text()[:100])  # cut short
    assert view_store.load(replica).stored == manifest.parent
    assert view_store.load(replica).lanes.gpu is not None


def test_a_run_folder_it_cannot_write_keeps_its_view_in_the_cache(
    replica: RunFolder, cache: Path, tmp_path: Path
) -> None:
    """A read-only folder (the shared fixtures, an archive) as root, who may write anywhere: the view's
    scratch folder is taken by a file, so writing into the run fails with a real OSError."""
    import shutil

    skip_view = shutil.ignore_patterns(view_store.VIEW_DIR)
    copy = RunFolder(Path(shutil.copytree(replica.path, tmp_path / replica.path.name, ignore=skip_view)))
    (copy.path / f"{view_store.VIEW_DIR}.tmp-{os.getpid()}").write_text("in the way")
    view = view_store.load(copy)
    assert view.stored is not None and view.stored.is_relative_to(cache)
    assert not (copy.path / view_store.VIEW_DIR).exists()
    assert view_store.load(copy).stored == view.stored  # read from the cache the next time


def test_a_small_run_is_not_stored(real_fixtures: Path, cache: Path, tmp_path: Path) -> None:
    import shutil

    source = real_fixtures / "gpu-h100" / "20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"
    folder = RunFolder(Path(shutil.copytree(source, tmp_path / source.name)))
    folder.path.chmod(0o755)
    assert view_store.store_if_big(folder) is None
    view = view_store.load(folder)
    assert view.stored is None and view.events < view_store.STORE_MIN_EVENTS and view.lanes.gpu is not None
    assert not (folder.path / view_store.VIEW_DIR).exists() and not cache.exists()
    assert (folder.path / f"{t.CUDA_API}.parquet").exists()


def _mapped_bytes(place: Path) -> tuple[int, int]:
    """Of the files under `place` that this process maps: the bytes resident in its memory and the bytes
    mapped (Linux's /proc/self/smaps: a page counts once this process touched it)."""
    resident = mapped = 0
    current = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header line
            current = len(fields) >= 6 and fields[5].startswith(str(place))
        elif current and fields[0] in ("Rss:", "Size:"):
            kib = int(fields[1]) * 1024
            resident += kib if fields[0] == "Rss:" else 0
            mapped += kib if fields[0] == "Size:" else 0
    return resident, mapped


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")
def test_opening_a_stored_view_reads_none_of_its_arrays(replica: RunFolder, cache: Path) -> None:
    """What the viewer asks at open (the first start, the kinds present, the span) comes from the manifest,
    and the arrays written are not scanned again: opening costs what the first view needs, not the events."""
    place = view_store.store_if_big(replica)
    assert place is not None
    view = view_store.load(replica)
    assert view.stored == place
    lanes = view.lanes
    assert lanes.threads is not None and lanes.gpu is not None
    facts = [(lanes.threads.origin_ns, lanes.threads.activities, lanes.threads.span_ns)]
    facts.append((lanes.gpu.origin_ns, lanes.gpu.activities, lanes.gpu.span_ns))
    resident, mapped = _mapped_bytes(place)
    assert mapped > 10 * 2**20  # the view's arrays are mapped (three copies of the run: tens of MB)
    assert resident < mapped / 20, (resident, mapped)  # and next to none of them read
    for record, (origin, activities, span) in zip((lanes.threads, lanes.gpu), facts):  # the facts are the arrays'
        assert origin == int(np.min(record.start_ns)) and span == (origin, int(np.max(record.end_ns)))
        assert activities == [n for i, n in enumerate(record.names) if i in set(np.unique(record.code).tolist())]
    assert _mapped_bytes(place)[0] > resident  # (the check above can see pages read)


def test_a_runs_api_split_is_read_from_a_current_stored_view(
    replica: RunFolder, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`view_store.api_phases` takes the split the stored view holds (the same rows `phase_summaries` computes), and
    computes it where the view is stale or the warm-up is not the one the view was made with."""
    from analyzers.figures import phases as ph
    from analyzers.run.run import Run
    from analyzers.summaries import cuda_api

    assert view_store.store_if_big(replica) == replica.path / view_store.VIEW_DIR
    computed = cuda_api.phase_summaries(replica)
    calls: list[int] = []
    real = cuda_api.phase_summaries
    monkeypatch.setattr(cuda_api, "phase_summaries", lambda *a, **k: calls.append(1) or real(*a, **k))
    stored = view_store.api_phases(Run.open(replica.path))
    assert not calls and set(ph.PHASES) <= set(stored) and stored["steady"]
    shown = {k: v for k, v in computed.items() if v}
    assert {k: v for k, v in stored.items() if v}.keys() == shown.keys()
    for phase, rows in shown.items():  # DuckDB's parallel sums may differ in the last bit between two runs
        assert [(r.name, r.total_ns, r.calls, r.med_ns) for r in stored[phase]] == [
            (r.name, r.total_ns, r.calls, r.med_ns) for r in rows
        ]
        assert [r.stddev_ns for r in stored[phase]] == pytest.approx([r.stddev_ns for r in rows], rel=1e-12)
    assert view_store.api_phases(Run.open(replica.path, warmup=2)) and calls == [1]
    threads.write(replica)  # a table written again: the stored view is stale until it is stored again
    assert view_store.stored_api_phases(replica) is None
    assert view_store.api_phases(Run.open(replica.path)) and calls == [1, 1]
