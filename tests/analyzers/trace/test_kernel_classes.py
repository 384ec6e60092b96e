"""Kernel classes: every fixture's kernel time classified (at most 5 % left in `other`), the docs table
equal to what the fixtures give, and the names of frameworks no fixture covers."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pyarrow as pa
import pytest

from analyzers.trace import kernel_classes as kc

ROOT = Path(__file__).resolve().parents[3]
DOCS_TABLE = ROOT / "docs" / "results" / "kernel-classes.md"


def _table_script():  # type: ignore[no-untyped-def]
    path = ROOT / "benchmarks" / "kernel_classes_table.py"
    spec = importlib.util.spec_from_file_location("kernel_classes_table", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kernels(real_fixtures: Path) -> dict[str, pa.Table]:
    return dict(_table_script().fixture_kernels(real_fixtures))


@pytest.fixture(scope="module")
def totals(kernels: dict[str, pa.Table]) -> dict[str, dict[str, int]]:
    return {name: kc.class_totals(table) for name, table in kernels.items()}


def test_the_rules_read_alike_by_re2_and_pythons_re(kernels: dict[str, pa.Table]) -> None:
    """The classes come from Python's `re` (`classify_distinct`); RE2 (Arrow's regex) reads the same rules
    to the same classes on every fixture's kernel names, so the rules hold to the syntax both share."""
    import pyarrow.compute as pc

    from analyzers.trace import kernel_names

    names = sorted({n for table in kernels.values() for n in table["name"].to_pylist() if n is not None})
    assert len(names) > 500  # 538 distinct names on 28 Nov 2026
    keys = pa.array([kernel_names.key(n) for n in names], pa.string())
    by_re2 = pa.nulls(len(names), pa.string())
    for cls, pattern in kc.RULES:
        hit = pc.match_substring_regex(keys, pattern, ignore_case=True)
        by_re2 = pc.if_else(pc.and_(pc.is_null(by_re2), hit), pa.scalar(cls, pa.string()), by_re2)
    expected = by_re2.fill_null(pa.scalar(kc.OTHER, pa.string())).to_pylist()
    assert kc.classify_distinct(names) == expected


def test_every_fixture_leaves_at_most_5_pct_in_other(totals: dict[str, dict[str, int]]) -> None:
    assert len(totals) == 22  # 18 traces (8 DLRM ranks), 3 H100 run folders and the H200 CUPTI run
    for fixture, by_class in totals.items():
        total = sum(by_class.values())
        assert total > 0, fixture
        assert by_class.get(kc.OTHER, 0) <= kc.OTHER_LIMIT * total, (fixture, by_class)


def test_docs_table_is_what_the_fixtures_give(totals: dict[str, dict[str, int]]) -> None:
    script = _table_script()
    lines = DOCS_TABLE.read_text().splitlines()
    start = lines.index(script.HEADER)
    rows = [line for line in itertools.takewhile(lambda x: x.startswith("|"), lines[start:]) if "---" not in line]
    assert rows[1:] == [script.row(fixture, by_class) for fixture, by_class in totals.items()]
    start = lines.index(script.FAMILIES_HEADER)
    families = [line for line in itertools.takewhile(lambda x: x.startswith("|"), lines[start:]) if "---" not in line]
    assert families[1:] == script.family_rows() and len(families) - 1 == len(script.FAMILIES)


# fmt: off
NAMES = [
    # XLA (JAX, TensorFlow with jit): fusions, custom calls that run cuBLAS/cuDNN/Triton
    ("loop_multiply_fusion", "fused"),
    ("input_reduce_fusion_3", "reduction"),
    ("fusion_42", "fused"),
    ("loop_convert_fusion", "fused"),
    ("wrapped_transpose", "memory"),
    ("gemm_fusion_dot_12", "matmul"),
    ("triton_gemm_dot_3", "matmul"),
    ("input_scatter_fusion", "indexing"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "matmul"),  # noqa: E501
    # TensorFlow / Eigen
    ("void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::TensorMap<Eigen::Tensor<float, 1, 1, long>, 16>, Eigen::TensorCwiseBinaryOp<Eigen::internal::scalar_sum_op<float, float>, Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, long>, 16> const> const> const, Eigen::GpuDevice>, long>(Eigen::TensorEvaluator<float, Eigen::GpuDevice>, long)", "elementwise"),  # noqa: E501
    ("void tensorflow::functor::ColumnReduceKernel<float const*, float*, cub::Sum>(float const*, float*, int, int, cub::Sum, std::iterator_traits<float const*>::value_type)", "reduction"),  # noqa: E501
    ("void tensorflow::functor::SwapDimension1And2InTensor3UsingTiles<unsigned int, 256, 32, 32, false>(unsigned int const*, tensorflow::functor::Dimension<3>, unsigned int*)", "memory"),  # noqa: E501
    ("void tensorflow::BiasNHWCKernel<float>(int, float const*, float const*, float*, int)", "elementwise"),
    ("void tensorflow::(anonymous namespace)::GenerateNormalizedProb<float, float, 4>(float const*, float const*, float const*, float*, int, int, bool)", "softmax_loss"),  # noqa: E501
    ("void tensorflow::functor::ApplyAdamKernel<float>(int, float*, float*, float*, float const*, float const*, float const*, float const*, float const*, float const*, float const*, bool)", "optimizer"),  # noqa: E501
    # cuBLAS / cuBLASLt / CUTLASS 3
    ("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", "matmul"),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, cutlass::gemm::collective::CollectiveMma<cute::SM90_TMA_LOAD, cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, cutlass::half_t>>>>(T1::Params)", "matmul"),  # noqa: E501
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasLt::cublasSplitKParams<float>, float const*)", "matmul"),  # noqa: E501
    # cuDNN, named by direction, or not
    ("sm86_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel", "conv_fwd"),  # noqa: E501
    ("void cudnn::detail::dgrad2d_alg1_1<float, 0, 6, 6, 5, 4, 4, false, true>(int, int, int, float const*, int)", "conv_bwd_data"),  # noqa: E501
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, int)", "conv_bwd_filter"),  # noqa: E501
    ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "conv"),
    # PyTorch's native kernels, nsys's and CUPTI's spelling
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)", "softmax_loss"),  # noqa: E501
    ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffZNS0_67_GLOBAL__N__06c19b41_28_ActivationThresholdKernel_cu_751192d7_1581121threshold_kernel_implIfEEvRNS_18TensorIteratorBaseET_S7_EUlffE_EESt5arrayIPcLm3EEE", "elementwise"),  # noqa: E501
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>>(int, T1)", "memory"),  # noqa: E501
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float, c10::BFloat16 const*)", "normalization"),  # noqa: E501
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>>(T1, T2)", "optimizer"),  # noqa: E501
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>>(Flash_bwd_params)", "attention"),  # noqa: E501
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attention"),  # noqa: E501
    # Triton (torch.compile)
    ("triton_poi_fused_add_cos_sin_0", "fused"),
    ("triton_red_fused__to_copy_mean_pow_0", "reduction"),
    ("triton_per_fused__native_batch_norm_legit_functional_1", "normalization"),
    ("triton_tem_fused_addmm_relu_0", "matmul"),
    # ROCm: rocBLAS/hipBLASLt (Tensile), MIOpen, RCCL
    ("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE_ASGT_ASAE01_ASCE01_ASEM1_AAC0", "matmul"),  # noqa: E501
    ("miopenSp3AsmConv_v21_1_3_gfx9_fp32_stride1", "conv"),
    ("naive_conv_fwd_nchw_float_double_float", "conv_fwd"),
    ("igemm_bwd_gtcx_nchw_fp32_bx0_ex1_bt64x64x16_wt32x32x2_ws1x1_wr1x1_ta1x4x1x1_1x4x1x16_tb1x4x1x1_1x4x1x16", "conv_bwd_data"),  # noqa: E501
    ("igemm_wrw_gtcx_nchw_fp32_bx0_ex0_bt64x64x16_wt32x32x2_ws1x1_wr1x1_ta1x1x4x1_1x16x1x16_tb1x1x4x1_1x16x1x16", "conv_bwd_filter"),  # noqa: E501
    ("MIOpenBatchNormFwdTrainSpatial", "normalization"),
    ("MIOpenPoolingForward", "reduction"),
    ("__amd_rocclr_copyBuffer", "memory"),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    # expert-parallel all-to-all (DeepEP in DeepSeek-V3's trace and upstream), custom all-reduce (vLLM, SGLang, TRT-LLM)
    ("void dpsk::ep::internode::dispatch<true, 8, 2, 1024>(int4*, float*, int*, long*, float*)", "communication"),
    ("void dpsk::ep::internode::combine<__nv_bfloat16, 8, 2, 1024>(int4*, float*, int const*)", "communication"),
    ("void dpsk::ep::internode::notify_dispatch<8>(int const*, int*, int, int const*, int*)", "communication"),
    ("void dpsk::ep::internode::cached_notify<8>(int, int, int, int, int*, int, int*)", "communication"),
    ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)", "communication"),
    ("void deep_ep::internode_ll::combine<false, 7168>(void*, void*, int*, int*)", "communication"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", "communication"),  # noqa: E501
    ("void sglang::cross_device_reduce_2stage<__nv_bfloat16, 4>(sglang::RankData*, sglang::RankSignals)", "communication"),  # noqa: E501
    ("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(tensorrt_llm::kernels::AllReduceParams)", "communication"),  # noqa: E501
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    # fbgemm: its name says gemm, its kernels mostly move and gather
    ("void fbgemm_gpu::permute_2D_data_kernel<float, long>(int, int, int, int const*, float const*)", "memory"),
    ("void fbgemm_gpu::permute_pooled_embs_kernel<float>(float const*, long const*, long const*, float*)", "memory"),
    ("void fbgemm_gpu::split_embedding_codegen_forward_unweighted_kernel<float, float, int, 32>(int)", "indexing"),
    # normalisation whoever wrote it: PyTorch, Apex, Transformer Engine, vLLM, Triton (torch.compile's RMSNorm)
    ("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*, float const*)", "normalization"),  # noqa: E501
    ("void cuApplyLayerNorm<float, float, float>(float*, float*, float*, float const*, int, int, float)", "normalization"),  # noqa: E501
    ("void cuComputePartGradGammaBeta<float, float, float>(float const*, float const*, int, int)", "normalization"),
    ("void transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<transformer_engine::normalization::Kernel_traits<__nv_bfloat16>>(transformer_engine::normalization::FwdParams)", "normalization"),  # noqa: E501
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)", "normalization"),  # noqa: E501
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)", "normalization"),  # noqa: E501
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "normalization"),
    ("triton_per_fused__to_copy_mean_mul_pow_rsqrt_1", "normalization"),
    # FlashAttention 2 and 3, cuDNN's fused SDPA, paged and Triton attention (vLLM on H100 and MI300X), CK's fmha
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, false, false, false, true, true, false>(Flash_fwd_params)", "attention"),  # noqa: E501
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1>>>>>>(T1::Params)", "attention"),  # noqa: E501
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_128x128x128_4x1x1_kernel0_0", "attention"),
    ("void vllm::paged_attention_v2_kernel<unsigned short, unsigned short, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, false, 512>(float*)", "attention"),  # noqa: E501
    ("_fwd_kernel", "attention"),
    ("kernel_unified_attention_2d", "attention"),
    ("void ck_tile::kentry<64, 2, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_t>>>>(ck_tile::FmhaFwdKernel::Kargs)", "attention"),  # noqa: E501
    # ROCm matrix multiplies: vLLM's skinny GEMMs, hipBLASLt (Tensile), CK; and KV-cache writes (memory)
    ("void wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>(int, int, __hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16*, int, int)", "matmul"),  # noqa: E501
    ("void wvSplitKQ_hf_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>(int, int)", "matmul"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1", "matmul"),
    ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>, true, 2>(ck::Argument)", "matmul"),  # noqa: E501
    ("void vllm::reshape_and_cache_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*, __hip_bfloat16 const*)", "memory"),  # noqa: E501
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*)", "memory"),  # noqa: E501
    # serving's other kernels: gated activation, rotary embedding, MoE routing and its Triton GEMM
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*, c10::BFloat16 const*, int)", "elementwise"),  # noqa: E501
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)", "elementwise"),  # noqa: E501
    ("void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, int, unsigned long)", "indexing"),  # noqa: E501
    ("fused_moe_kernel", "matmul"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "matmul"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(cublasGemvParamsEx<int, float const*, float const*, float*>, float, float)", "matmul"),  # noqa: E501
    ("test2(double *, unsigned long long, unsigned long long)", "other"),
]
# fmt: on


@pytest.mark.parametrize(("name", "expected"), NAMES, ids=[n[:40] for n, _ in NAMES])
def test_names_of_every_library(name: str, expected: str) -> None:
    assert kc.classify_distinct([name]) == [expected]


def test_the_column_whatever_the_name_array() -> None:
    """Plain, chunked and dictionary-encoded name columns give one class per row, in row order."""
    names = ["ncclDevKernel_SendRecv(x)", "volta_sgemm_64x64_nt", "ncclDevKernel_SendRecv(x)", None]
    chunked = pa.chunked_array([names[:2], names[2:]], pa.string())
    for column in (pa.array(names, pa.string()), chunked, pa.array(names, pa.string()).dictionary_encode()):
        table = kc.with_classes(pa.table({"name": column, "dur_ns": [1, 2, 3, 4]}))
        assert table[kc.KERNEL_CLASS].to_pylist() == ["communication", "matmul", "communication", "other"]
    assert kc.class_totals(pa.table({"name": names[:3], "dur_ns": [1, 2, 3]})) == {"communication": 4, "matmul": 2}


def test_every_class_is_declared_once() -> None:
    keys = [c.key for c in kc.CLASSES]
    assert len(keys) == len(set(keys)) and keys[-1] == kc.OTHER
    assert {cls for cls, _ in kc.RULES} == set(keys) - {kc.OTHER}
