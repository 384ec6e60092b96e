"""One kernel-naming rule for every backend: anonymous namespaces and templates keep the function's
name, identical short names are told apart, CUPTI's symbols read as nsys's names (real H100 runs)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.summaries.kernels import kernel_summary
from analyzers.trace import kernel_names as kn
from tests.analyzers.conftest import KINETO_FILES, NSYS_FILES
from tracer.core.runfolder import RunFolder

GPU = "gpu-h100"
CUPTI_RUN = "20261125-001502-pytorch-alexnet-big-gpu-b100-a266"  # same job as NSYS_RUN, traced by CUPTI
NSYS_RUN = "20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"
SOFTMAX_GNU = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"
)
SOFTMAX_EDG = (
    "void at::native::<unnamed>::cunn_SoftMaxForward<(int)4, float, float, float, "
    "at::native::<unnamed>::SoftMaxForwardEpilogue>(T4 *, const T2 *, int)"
)


def test_anonymous_namespace_keeps_the_function_name() -> None:
    assert kn.short_name(SOFTMAX_GNU) == kn.short_name(SOFTMAX_EDG) == "at::native::cunn_SoftMaxForward<…>"
    assert kn.key(SOFTMAX_GNU) == kn.key(SOFTMAX_EDG)
    kernel = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "std::array<char*, 1ul> >(int)"
    )
    assert kn.short_name(kernel) == "at::native::vectorized_elementwise_kernel<…>"
    assert kn.short_name("cudaLaunchKernel") == "cudaLaunchKernel"
    long = "ns::" * 30 + "kernel"
    assert len(kn.short_name(long)) <= kn.NAME_WIDTH and kn.short_name(long).endswith("::kernel")


def test_identical_short_names_get_the_arguments_that_differ() -> None:
    names = [
        "void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<float>>(T3)",
        "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float>>(T3)",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nt_align1>(T1::Params)",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)",
        "void softmax<float>(float*)",
    ]
    labels = kn.short_names(names)
    assert labels[names[0]] == "at::native::reduce_kernel<128, 4, …>"
    assert labels[names[1]] == "at::native::reduce_kernel<512, 1, …>"
    assert labels[names[2]] == "cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nt_align1>"
    assert labels[names[4]] == "softmax<…>"  # alone: folded
    overloads = kn.short_names(["void f(int)", "void f(float)"])
    assert sorted(overloads.values()) == ["f #1", "f #2"]


def _fixture_names(real_fixtures: Path, ingested: dict[str, RunFolder]) -> dict[str, list[str]]:
    out = {rel: [r.name for r in kernel_summary(ingested[rel])] for rel in NSYS_FILES + KINETO_FILES}
    for run in (CUPTI_RUN, NSYS_RUN):
        out[run] = pq.read_table(real_fixtures / GPU / run / "kernels.parquet", columns=["name"])["name"].to_pylist()
    return out


def test_every_fixture_kernel_has_a_unique_readable_label(real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    for source, names in _fixture_names(real_fixtures, ingested).items():
        if not names:
            continue
        labels = kn.short_names(names)
        distinct = {kn.key(n) for n in names}
        assert len(set(labels.values())) == len(distinct), source
        assert all(not v.endswith("::") and 0 < len(v) <= kn.WORDS_WIDTH for v in labels.values()), source
    kineto = kernel_summary(ingested["kineto-h100/resnet50_bs100_train_torch2.11.json.gz"])
    pool = next(r for r in kineto if "max_pool_backward_nchw" in r.name)
    assert "(anonymous namespace)" in pool.name and pool.short_name == "at::native::max_pool_backward_nchw<…>"


def test_cupti_and_nsys_name_one_job_alike(real_fixtures: Path) -> None:
    cupti = {r.short_name: r for r in kernel_summary(RunFolder(real_fixtures / GPU / CUPTI_RUN))}
    nsys = {r.short_name: r for r in kernel_summary(RunFolder(real_fixtures / GPU / NSYS_RUN))}
    assert len(cupti) == len(nsys) == 112
    demangled = [r for r in cupti.values() if not r.name.startswith("_Z")]
    assert len(demangled) == 109  # three 1,600-character CUTLASS symbols that c++filt refuses too
    assert {kn.key(r.name) for r in demangled} <= {kn.key(r.name) for r in nsys.values()}
    shared = set(cupti) & set(nsys)
    # the refused symbols and the kernels told apart from them (a family of different members) read otherwise
    assert len(shared) == 105
    assert "at::native::max_pool_forward_nchw<…>" in shared
    assert "at::native::reduce_kernel<512, 1, sum_functor[float]>" in shared
    refused = sorted(set(cupti) - shared)
    assert all(label.startswith("cutlass__5x_cudnn") for label in refused), refused


@pytest.mark.parametrize("symbol", ["_ZN5cudnn3cnn23kern_precompute_indicesILb0EEEvPiiiiii", "_Z3foov"])
def test_demangle(symbol: str) -> None:
    assert not kn.demangle(symbol).startswith("_Z") and "(" in kn.demangle(symbol)
    assert kn.demangle("sm90_xmma_gemm_kernel") == "sm90_xmma_gemm_kernel"
