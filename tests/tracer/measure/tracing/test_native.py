"""--trace native (issue 38): each framework's own profiler over the trace window, on the CPU, in a tiny
real run per framework; its operators land in the operator table under their own names (convolutions
and matrix multiplies on top), `compare` shows two frameworks' top operators per image, and the XPlane
files JAX's and TensorFlow's profilers wrote have XProf's own operator totals. SINGA is refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from analyzers.summaries.operators import operator_summary
from tests.analyzers.ingest.test_imports import viewer_op_totals
from tests.conftest import TINY, run_tracer
from tracer.core.errors import UserError
from tracer.core.records import RunSpec, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.core.schema import NATIVE_TRACE_FILES
from tracer.measure.tracing.native import NativeBackend

NATIVE = ("--model", "mobilenet_v2", "--trace-window", "2", "--batch", "8", "--trace", "native")
"""Two tiny epochs (TINY), the second traced: what the profiler sees is training, not the model's set-up."""
CONV_OR_MATMUL = {
    "pytorch": re.compile(r"conv|addmm|\bmm\b|linear", re.I),
    "tensorflow": re.compile(r"conv2d|matmul", re.I),  # _MklNativeFusedConv2D, DepthwiseConv2dNative, ...
    "jax": re.compile(r"convolution|dot"),  # XLA's names (convolution-base-dilated.3)
    "paddle": re.compile(r"conv2d|matmul", re.I),
    "mxnet": re.compile(r"Convolution|FullyConnected"),
}
"""What each framework's own profiler calls a convolution or a matrix multiply."""


def test_singa_is_refused_in_one_line(tmp_path: pytest.TempPathFactory) -> None:
    with pytest.raises(UserError, match="SINGA has no profiler of its own"):
        NativeBackend().check(RunSpec(framework="singa", model="alexnet", dataset="small"))
    for framework in NATIVE_TRACE_FILES:
        NativeBackend().check(RunSpec(framework=framework, model="alexnet", dataset="small"))
    result = run_tracer("profile", "--framework", "singa", "--model", "alexnet", *TINY, "--trace", "native",
                        "--out", str(tmp_path))  # fmt: skip
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert "--trace native" in result.stderr


@pytest.fixture(scope="module")
def native_runs(make_run: Callable[..., RunFolder]) -> dict[str, RunFolder | BaseException]:
    """A tiny CPU run of each framework with its own profiler, two at a time (nothing here is timed against
    another run), all made before the first test (the child guard ends what a test leaves running); a
    framework that is absent holds its skip."""

    def one(framework: str) -> RunFolder | BaseException:
        try:
            return make_run(framework, *NATIVE)
        except pytest.skip.Exception as skipped:
            return skipped

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(CONV_OR_MATMUL, pool.map(one, CONV_OR_MATMUL)))


@pytest.fixture
def native_run(native_runs: dict[str, RunFolder | BaseException]) -> Callable[[str], RunFolder]:
    def get(framework: str) -> RunFolder:
        made = native_runs[framework]
        if isinstance(made, BaseException):
            raise made  # the framework's skip
        return made

    return get


@pytest.mark.parametrize("framework", list(CONV_OR_MATMUL))
def test_a_native_run_has_its_frameworks_operators(native_run: Callable[[str], RunFolder], framework: str) -> None:
    folder = native_run(framework)
    record = folder.read_record()
    assert record.outcome.status is RunStatus.OK, record.outcome
    assert f"raw/{NATIVE_TRACE_FILES[framework]}" in record.trace_files
    top = [r.name for r in operator_summary(folder)[:3]]
    assert any(CONV_OR_MATMUL[framework].search(name) for name in top), top
    overhead = [e for e in folder.events() if e["kind"] == "trace_overhead"]
    assert overhead and overhead[0]["backend"] in ("native", "torch"), overhead


def test_compare_shows_each_frameworks_top_operators_per_image(native_run: Callable[[str], RunFolder]) -> None:
    two = [native_run("pytorch"), native_run("tensorflow")]
    result = run_tracer("compare", *(str(f.path) for f in two))
    assert result.returncode == 0, result.stderr
    assert "top framework operators by self time, per traced image" in result.stdout
    for folder in two:
        assert operator_summary(folder)[0].name[:12] in result.stdout
    assert "/image" in result.stdout


@pytest.mark.parametrize("framework", ["jax", "tensorflow"])
def test_native_xplane_totals_equal_xprofs(native_run: Callable[[str], RunFolder], framework: str) -> None:
    """The operator table of the XPlane the framework's profiler wrote in the run has the totals of XProf's
    own converter's events (the framework_op_stats check is in tests/analyzers/ingest/test_imports.py)."""
    folder = native_run(framework)
    ours = {r.name: r.total_ns for r in operator_summary(folder)}
    assert ours and viewer_op_totals(folder.raw_dir / NATIVE_TRACE_FILES[framework]) == ours
