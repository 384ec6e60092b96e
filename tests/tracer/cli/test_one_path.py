"""One run, one path (issue 51): every command that takes a run gives the same answer for a trace file named
on it and for that file's `tracer import`, on real traces of every format the tool reads (the fixtures of
tests/data/fixtures, and the rocpd, nsys-jax and XPlane traces the ingest tests make), and `tracer diff` of a
real PyTorch DataLoader pair (0 loader workers against 2) names data wait for the files as for the imports."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analyzers.ingest.import_cache import IMPORTS_DIR
from tests.analyzers.ingest.test_imports import _make_rpd, _nsys_jax_rows, _profile
from tests.conftest import require_framework
from tracer.core.runfolder import list_runs
from tracer.measure.environments import status

FIXTURES = {
    "nsys-sqlite": "extra-p/con_kernel.sqlite",
    "nsys-sqlite-h100": "nsys-h100/resnet18_train_nsys2025.3.1.sqlite",
    "nsys-sqlite-2gpu": "nsys-ai/mfu_2gpu_before.sqlite",
    "kineto-hta": "hta/benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto-nccl": "hta/nccl_data.json.gz",
    "kineto-h100": "kineto-h100/resnet50_bs100_train_torch2.11.json.gz",
    "kineto-2021": "kineto-2021/worker0.1623143089861.pt.trace.json.gz",
    "dlrm-8-ranks": "param-dlrm-8rank",
}
"""Real traces in tests/data/fixtures (SOURCES.md): nsys SQLite of one process and of two ranks, Kineto of
2021 to 2026, and a folder of eight ranks' Kineto traces."""
MADE = ("rocpd", "nsys-jax", "xplane")
"""Traces made here as the ingest tests make them (tests/analyzers/ingest/test_imports.py)."""
REFERENCE = "hta/triton_example.json.gz"
"""The other side of `compare`, imported once (`diff` sets a trace against itself: a trace with steps and one
without are refused, rightly)."""
LOADER = Path(__file__).with_name("profiled_loader.py")


def _tracer(cache: Path, *args: str, script: tuple[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`tracer ARGS` (or `python -c SCRIPT ARG`) with its own cache, piped, 400 columns wide."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {
        "TRACER_CACHE": str(cache),
        "COLUMNS": "400",  # no table cell wraps: the run id's length moves nothing but the padding
    }
    argv = ["-c", *script] if script is not None else ["-m", "tracer", *args]
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=600)


EACH = """
import contextlib, io, json, sys
from tracer.cli import main
said = {}
for name, args in json.loads(sys.argv[1]).items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    said[name] = [code, out.getvalue(), err.getvalue()]
print(json.dumps(said))
"""
"""Every command in one process, each as `tracer.cli.main` runs it (a process each cost more than the command)."""


def _tracer_each(cache: Path, commands: dict[str, list[str]]) -> dict[str, tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each command, run in one child process."""
    done = _tracer(cache, script=(EACH, json.dumps(commands)))
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: (code, out, err) for name, (code, out, err) in json.loads(done.stdout).items()}


def _made_trace(kind: str, where: Path) -> Path:
    """A rocpd database, an nsys-jax archive, or a JAX profile folder (its XPlane inside)."""
    where.mkdir(parents=True, exist_ok=True)
    if kind == "rocpd":
        _make_rpd(where / "trace.rpd", steps=3, seed=1)
        return where / "trace.rpd"
    if kind == "nsys-jax":
        table, _ = _nsys_jax_rows(seed=2)
        trace, threads = io.BytesIO(), io.BytesIO()
        pq.write_table(table, trace)
        pq.write_table(pa.table({"Name": ["XlaLauncher:#global=0,local=0,process=0,slice=0#"], "PID": [11],
                                 "TID": [12]}), threads)  # fmt: skip
        archive = where / "profile.zip"
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("profile/nvtx_gpu_proj_trace/trace.parquet", trace.getvalue())
            z.writestr("profile/thread-metadata.parquet", threads.getvalue())
        return archive
    return _profile("jax", where / "jaxlog")


def _same(text: str, names: list[str]) -> str:
    """An output with the run's names (its id, its folder) as one word and no layout: a longer id only
    widens a title or a column, or moves where a title wraps."""
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, "RUN")
    return re.sub(r"[\s\u2500-\u257f]+", "", text)


MUST_ANSWER = ("analyze", "analyze-table", "show", "show-text", "diagnose", "export-trace")
"""The commands every readable trace answers; `compare` and `diff` may refuse a trace (the same way for both)."""


def _commands(trace: str, reference: str, out: Path) -> dict[str, list[str]]:
    return {
        "analyze": ["analyze", trace, "--format", "json"],
        "analyze-table": ["analyze", trace],
        "show": ["show", trace, "--format", "json"],
        "show-text": ["show", trace],
        "diagnose": ["diagnose", trace, "--format", "json"],
        "compare": ["compare", reference, trace, "--format", "json"],
        "diff": ["diff", trace, trace, "--format", "json"],
        "diff-text": ["diff", trace, trace],
        "export-trace": ["export-trace", trace, str(out)],
    }


@pytest.fixture(scope="module")
def reference(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reference")
    done = _tracer(out / "cache", "import", str(real_fixtures / REFERENCE), "--out", str(out / "runs"))
    assert done.returncode == 0, done.stderr
    (run,) = list_runs(out / "runs")
    return run.path


@pytest.mark.parametrize("name", [*FIXTURES, *MADE])
def test_every_command_answers_alike_for_a_trace_and_its_import(
    name: str, real_fixtures: Path, reference: Path, tmp_path: Path
) -> None:
    trace = real_fixtures / FIXTURES[name] if name in FIXTURES else _made_trace(name, tmp_path / "made")
    cache = tmp_path / "cache"
    done = _tracer(cache, "import", str(trace), "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    (imported,) = list_runs(tmp_path / "runs")
    answers: dict[str, dict[str, str]] = {}
    printed: dict[str, str] = {}  # the file's stdout, by command
    for side, ref in (("file", str(trace)), ("import", str(imported.path))):
        commands = _commands(ref, str(reference), tmp_path / f"{side}.json")
        for command, (code, out, err) in _tracer_each(cache, commands).items():
            # a refusal is an answer too (diff of a trace with neither steps nor a GPU trace): the same one
            assert code == 0 or command not in MUST_ANSWER, f"{command} {side}: {err[-3000:]}"
            answers.setdefault(command, {})[side] = f"exit {code}\n{out}\n{err}"
            printed.setdefault(command, out)
        if side == "file":
            (cached,) = [p for p in (cache / IMPORTS_DIR).iterdir() if not p.name.startswith(".")]
    names = [imported.run_id, str(imported.path), cached.name, str(cached), str(trace)]
    for command, said in answers.items():
        file_said, import_said = (_same(said[s].replace(str(tmp_path / f"{s}.json"), "OUT"), names) for s in said)
        assert file_said == import_said, command
    exported = [json.loads((tmp_path / f"{side}.json").read_text()) for side in ("file", "import")]  # whole
    assert exported[0] == exported[1] and exported[0]["traceEvents"]
    analyzed = json.loads(printed["analyze"])
    assert analyzed["kernels"] or analyzed["operators"] or analyzed["cuda_api"]  # it did read the trace


def test_a_trace_file_opens_in_the_viewer(real_fixtures: Path, tmp_path: Path) -> None:
    """`view FILE --screenshot`: the trace is imported into the cache and drawn (offscreen Qt)."""
    pytest.importorskip("PySide6")
    shot = tmp_path / "shot.png"
    done = _tracer(tmp_path / "cache", "view", str(real_fixtures / REFERENCE), "--screenshot", str(shot))
    assert done.returncode == 0, done.stderr[-3000:]
    assert shot.stat().st_size > 10_000


def test_diff_of_two_dataloader_traces_names_data_wait_as_their_imports_do(tmp_path: Path) -> None:
    """The issue's case: 0 loader workers against 2, a real training under torch.profiler on the CPU, its
    script timing its own waits. `diff` of the files and of their imports both find the profiled steps, give
    the same parts, and say what the script's own clock says: A (0 workers) waiting longer, data wait leading
    where it is most of the gap (on a quiet machine; on a busy one the workers cannot decode ahead)."""
    require_framework("pytorch")
    python = status("pytorch").python
    truths, traces = [], []
    for workers in (0, 2):
        trace = tmp_path / f"workers{workers}.pt.trace.json"
        done = subprocess.run(
            [python, str(LOADER), str(trace), "--workers", str(workers)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        truths.append(json.loads(done.stdout.strip().splitlines()[-1]))
        traces.append(trace)
    cache = tmp_path / "cache"
    imports = []
    for trace in traces:
        out = tmp_path / f"runs-{trace.name}"
        assert _tracer(cache, "import", str(trace), "--out", str(out)).returncode == 0
        (run,) = list_runs(out)
        imports.append(run.path)
    answers = []
    for a, b in ((traces[0], traces[1]), (imports[0], imports[1])):
        result = _tracer(cache, "diff", str(a), str(b), "--format", "json")
        assert result.returncode == 0, result.stderr[-3000:]
        answers.append(json.loads(result.stdout))
    names = [*(p.name for p in (cache / IMPORTS_DIR).iterdir()), *(p.name for p in imports)]
    # The script's own timing says what leads: on a quiet machine the loader workers decode ahead and data wait
    # is most of the gap; on a busy one they cannot, and the gap may be compute. The tool must say what the
    # script measured, whichever it was.
    wait_gap = truths[0]["wait_s"] - truths[1]["wait_s"]
    compute_gap = (truths[0]["step_s"] - truths[0]["wait_s"]) - (truths[1]["step_s"] - truths[1]["wait_s"])
    for said in answers:  # the steps the script profiled, and the data wait it timed itself
        assert said["a"]["steps"] == truths[0]["steps"] and said["b"]["steps"] == truths[1]["steps"]
        wait = next(p for p in said["parts"] if p["key"] == "data_wait")
        if abs(wait_gap) > 0.2 * max(t["wait_s"] for t in truths):  # a difference the script's clock is sure of
            assert (wait["a_s"] > wait["b_s"]) == (wait_gap > 0), (wait, truths)
        if abs(wait_gap) > 2 * abs(compute_gap):  # data wait, by the script's own clock, is most of the gap
            assert said["parts"][0]["key"] == "data_wait", (said["parts"], truths)
            assert "waiting for data" in " ".join(said["sentences"][:2]), said["sentences"]
    assert answers[0]["parts"] == answers[1]["parts"]
    assert [_same(s, names) for s in answers[0]["sentences"]] == [_same(s, names) for s in answers[1]["sentences"]]
