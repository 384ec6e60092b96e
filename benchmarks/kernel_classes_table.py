"""The kernel classes of every fixture with GPU kernels, as the Markdown table of
docs/results/kernel-classes.md (a test checks that the page says what this prints).

    python benchmarks/kernel_classes_table.py [FIXTURES_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analyzers.ingest.pipeline import read_trace
from analyzers.trace import kernel_classes
from analyzers.trace import tables as t

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "fixtures"
TRACES = (
    "nsys-h100/resnet18_train_nsys2025.3.1.sqlite",
    "nsys-ai/mfu_2gpu_before.sqlite",
    "nsys-ai/mfu_2gpu_after.sqlite",
    "nsys-ai/h100_2gpu_1s.sqlite",
    "nsys-ai/mock.sqlite",
    "kineto-h100/resnet50_bs100_train_torch2.11.json.gz",
    "kineto-2021/worker0.1623143089861.pt.trace.json.gz",
    "hta/benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/nccl_data.json.gz",
    "hta/triton_example.json.gz",
    *(f"param-dlrm-8rank/{p.name}" for p in sorted((FIXTURES / "param-dlrm-8rank").glob("worker*.json.gz"))),
)
"""Every fixture trace with GPU kernels (extra-p's are CUDA samples, not a framework's, and are left out)."""
RUN_FOLDERS = ("cf98", "a9b3", "a266")
"""The traced H100 run folders (gpu-h100/*-<id>), whose kernels tables were ingested there."""
REPO = Path(__file__).resolve().parents[1]
REPO_RUNS = ("tests/data/gpu-h200/*-cd88",)
"""Traced run folders kept in the repository (the H200 CUPTI run of the ctypes collector)."""
HEADER = "| fixture | kernel time (ms) | other (%) | classes (% of kernel time, 1 % and more) |"
FAMILIES = (
    ("cuBLAS / cuBLASLt", "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT"),
    ("CUTLASS", "cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<...>>"),
    ("cuDNN", "sm86_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x64"),
    ("FlashAttention 2", "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>"),
    ("FlashAttention 3", "cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>"),
    ("Triton (torch.compile) RMSNorm", "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"),
    ("vLLM RMSNorm", "vllm::rms_norm_kernel<c10::BFloat16>"),
    ("PyTorch layer-norm backward", "at::native::GammaBetaBackwardCUDAKernel<float, float>"),
    ("Apex", "cuComputePartGradGammaBeta<float, float, float>"),
    ("Transformer Engine", "transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<...>"),
    ("NCCL up to 2.18", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("NCCL 2.19 and later, RCCL", "ncclDevKernel_Generic"),
    ("DeepEP (DeepSeek-V3)", "dpsk::ep::internode::dispatch<true, 8, 2, 1024>"),
    ("vLLM / SGLang custom all-reduce", "vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>"),
    ("fbgemm", "fbgemm_gpu::permute_2D_data_kernel<float, long>"),
    ("vLLM on ROCm: attention", "_fwd_kernel"),
    ("vLLM on ROCm: skinny GEMM", "wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>"),
    ("vLLM KV cache", "vllm::reshape_and_cache_kernel<__hip_bfloat16, __hip_bfloat16>"),
    ("hipBLASLt / rocBLAS (Tensile)", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64_MI16x16x1"),
    ("Composable Kernel", "ck::kernel_gemm_xdl_cshuffle_v3<...>"),
    ("XLA", "loop_multiply_fusion"),
)
"""A kernel of each library the classes were grown from, as the docs table of families shows them (the tests
pin each family's class with a full real name)."""
FAMILIES_HEADER = "| library | kernel (short) | class |"


def family_rows() -> list[str]:
    classes = kernel_classes.classify_distinct([name for _, name in FAMILIES])
    return [f"| {lib} | `{name}` | {cls} |" for (lib, name), cls in zip(FAMILIES, classes)]


def fixture_kernels(fixtures: Path = FIXTURES) -> dict[str, pa.Table]:
    """Fixture (its path under `fixtures`, or the run folder's in the repository) -> its kernels table."""
    out = {}
    for rel in TRACES:
        tables, _clock = read_trace(fixtures / rel)
        out[rel] = tables[t.KERNELS]
    for short in RUN_FOLDERS:
        folder = next((fixtures / "gpu-h100").glob(f"*-{short}"))
        out[f"gpu-h100/{folder.name}"] = pq.read_table(folder / f"{t.KERNELS}.parquet")
    for pattern in REPO_RUNS:
        folder = next(REPO.glob(pattern))
        out[str(folder.relative_to(REPO))] = pq.read_table(folder / f"{t.KERNELS}.parquet")
    return out


def fixture_totals(fixtures: Path = FIXTURES) -> dict[str, dict[str, int]]:
    """Fixture -> kernel time (ns) by class."""
    return {name: kernel_classes.class_totals(kernels) for name, kernels in fixture_kernels(fixtures).items()}


def row(fixture: str, totals: dict[str, int]) -> str:
    total = sum(totals.values())
    other = 100 * totals.get(kernel_classes.OTHER, 0) / total
    shares = sorted(((100 * ns / total, key) for key, ns in totals.items()), key=lambda x: (-x[0], x[1]))
    text = ", ".join(f"{key} {share:.0f}" for share, key in shares if share >= 1 and key != kernel_classes.OTHER)
    return f"| {fixture} | {total / 1e6:,.1f} | {other:.1f} | {text} |"


def main(argv: list[str]) -> int:
    fixtures = Path(argv[0]) if argv else FIXTURES
    print(HEADER)
    print("| --- | --- | --- | --- |")
    for fixture, totals in fixture_totals(fixtures).items():
        print(row(fixture, totals))
    print()
    print(FAMILIES_HEADER)
    print("| --- | --- | --- |")
    for line in family_rows():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
