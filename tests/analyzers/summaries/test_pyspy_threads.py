"""py-spy's samples on the thread table (analyzers.ingest.threads, analyzers.summaries.threads): on the H100 fixture
e36e (CUPTI + `--pyspy`), whose speedscope profiles name threads but no process, the samples join the
worker's threads (they sat apart with pid -1, every thread showing 0 s of py-spy), and the tool's own
lifeline thread is not among the training's threads."""

from __future__ import annotations

from pathlib import Path

from analyzers.summaries.threads import thread_summary
from tracer.core.runfolder import RunFolder
from tracer.core.schema import LIFELINE_THREAD


def test_pyspy_samples_join_the_workers_threads(real_fixtures: Path) -> None:
    (path,) = [p for p in (real_fixtures / "gpu-h100").iterdir() if p.name.endswith("e36e")]
    folder = RunFolder(path)
    pid = folder.read_record().worker_pid
    rows = thread_summary(folder)
    assert all(r.pid != -1 for r in rows)
    sampled = [r for r in rows if r.pyspy_ns > 0]
    assert sampled and all(r.pid == pid for r in sampled)
    main = next(r for r in rows if r.pid == pid and r.tid == pid)
    assert main.cpu_s > 0 and main.pyspy_ns > 0  # the sampler's CPU and py-spy's samples on one row
    assert not any(r.thread_name == LIFELINE_THREAD for r in rows)
