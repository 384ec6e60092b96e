"""Labels a person can read (issue 38): operator names as the framework recorded them, kernel labels that
keep what tells kernels apart (never two rows alike, on every real fixture), one number format per
column, ratios that are never 0.00x, and no tracer option in the advice for a trace made elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzers.diagnosis.knobs import knob
from analyzers.render import display
from analyzers.trace import kernel_names as kn
from tracer.core.frameworks import Tuning
from tracer.core.records import RunSpec
from tracer.core.workload import BuiltinWorkload, ImportedWorkload, Measurement

FIXTURES = [
    "kineto-2021/worker0.1623143089861.pt.trace.json.gz",
    "kineto-h100/resnet50_bs100_train_torch2.11.json.gz",
    "hta/nccl_data.json.gz",
    "param-dlrm-8rank/worker0_step_12.1694128201545.pt.trace.json.gz",
    "nsys-ai/mfu_2gpu_before.sqlite",
]
SECTIONS = ("operators", "cuda_api", "kernels")


def _analyze(path: Path, tmp_path: Path, *extra: str) -> str:
    """`tracer analyze FILE` as a user runs it, its imports cached under `tmp_path`."""
    env = dict(os.environ, TRACER_CACHE=str(tmp_path / "cache"), COLUMNS="400")
    cmd = [sys.executable, "-m", "tracer", "analyze", str(path), "--top", "500", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def analyses(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict]]]:
    """What `tracer analyze` shows of each fixture, as rows (its tables are made from them)."""
    from analyzers.ingest.pipeline import ingest_file
    from analyzers.run.run import Run
    from tracer.cli.analyze import analysis
    from tracer.core.runfolder import RunFolder

    out = {}
    for rel in FIXTURES:
        folder = RunFolder(tmp_path_factory.mktemp("labels"))
        ingest_file(real_fixtures / rel, folder)
        out[rel] = analysis(Run.open(folder), "whole")
    return out


def test_no_two_rows_of_an_analyze_table_read_the_same(analyses: dict[str, dict[str, list[dict]]]) -> None:
    for rel, data in analyses.items():
        for section in SECTIONS:
            rows = data[section]
            if not rows:
                continue
            _headers, cells = display.table(rows)
            labels = [row[0] for row in cells]
            assert len(set(labels)) == len(labels), (rel, section, sorted(labels))
            if section == "kernels":
                unreadable = [x for x in labels if "operator const" in x or "operator()" in x]
                assert not unreadable, (rel, unreadable)


def test_elementwise_kernels_name_their_op(analyses: dict[str, dict[str, list[dict]]]) -> None:
    rows = analyses["hta/nccl_data.json.gz"]["kernels"]
    labels = {r["short_name"] for r in rows}
    assert "vectorized_elementwise_kernel<…, neg_kernel_cuda[float], …>" in labels, sorted(labels)
    nsys = {r["short_name"] for r in analyses["nsys-ai/mfu_2gpu_before.sqlite"]["kernels"]}
    assert any("direct_copy_kernel_cuda[float]" in x for x in nsys), sorted(nsys)


def test_template_argument_namespaces_tell_kernels_apart() -> None:
    """DeepSeek-V3's grouped GEMMs differ only in the namespace of their one template argument."""
    names = [
        f"void cutlass::device_kernel<dpsk::grouped_gemm::cuda::{kind}::GemmKernel>(T1::Params)"
        for kind in ("fp8_ptp128c", "bf16", "fp8_ptp128c_wgrad")
    ]
    labels = kn.short_names(names)
    assert labels[names[0]] == "cutlass::device_kernel<fp8_ptp128c::GemmKernel>"
    assert len(set(labels.values())) == 3 and not any("#" in v for v in labels.values()), labels


def test_a_symbol_the_demangler_refuses_keeps_the_words_that_differ() -> None:
    shape = "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel9GemmShapeILi{}ELi128ELi32EEEEEvNT_6ParamsE"
    names = [shape.format(128), shape.format(64)]
    assert kn.demangle(names[0]) != names[0]  # this short one demangles; a refused one is read the same way
    words = kn._mangled_words(names[0], len("_ZN19cutlass_cudnn_train6Kernel") + 1)
    assert words[:5] == ["conv", "kernel", "GemmShape", "128", "128"]


def test_operator_names_are_shown_as_recorded(
    analyses: dict[str, dict[str, list[dict]]], real_fixtures: Path, tmp_path: Path
) -> None:
    shown = {row[0] for row in display.table(analyses[FIXTURES[0]]["operators"])[1]}
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in shown
    printed = _analyze(real_fixtures / FIXTURES[3], tmp_path)  # the terminal table, as a user sees it
    assert "fbgemm::dense_embedding_codegen_lookup_function" in printed
    rows = display.table(
        [
            {"name": "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "calls": 1},
            {"name": "autograd::engine::evaluate_function: ConvolutionBackward0", "calls": 2},
        ]
    )[1]
    assert [r[0] for r in rows] == [
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
        "autograd::engine::evaluate_function: ConvolutionBackward0",
    ]


def test_one_number_format_per_column() -> None:
    rows = [
        {"median_threads": 5.0, "cores": 13.5, "avg_ns": 4_000_000.0},
        {"median_threads": 13.0, "cores": 4.0, "avg_ns": 13_500_000.0},
    ]
    headers, cells = display.table(rows)
    assert headers == ["median_threads", "cores", "avg (ms)"]
    assert cells == [["5", "13.5", "4.00"], ["13", "4.00", "13.5"]]
    assert display.significant(0.000207) == "0.000207" and display.significant(112.84) == "112.8"


def test_ratios_have_digits_enough_to_be_non_zero() -> None:
    assert display.ratio_text(0.018 / 11.4) == "0.00158x"
    assert display.ratio_text(1.0) == "1.00x" and display.ratio_text(None) == "-"


def test_advice_for_a_foreign_trace_names_no_tracer_option() -> None:
    from tracer.core.records import EnvironmentInfo, Outcome, RunRecord, RunStatus

    spec = RunSpec(framework="pytorch", model="resnet50", dataset="small", device="gpu")
    env = EnvironmentInfo("unknown", "unknown", "unknown", 0, 0, 0.0, "3")
    measured = Measurement.of_spec(spec)
    ok = Outcome(status=RunStatus.OK)
    ours = RunRecord("a", BuiltinWorkload(spec), measured, env, ok, wall_start_ns=0)
    imported = RunRecord("b", ImportedWorkload("/x/trace.json", model="resnet18"), measured, env, ok, wall_start_ns=0)
    assert "tracer --sync-every" in knob(ours, Tuning.SYNC)
    assert "tracer" not in knob(imported, Tuning.SYNC)
