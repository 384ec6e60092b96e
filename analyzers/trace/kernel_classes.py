"""What a GPU kernel does, in classes that mean the same in every framework: the level at which two
frameworks' GPU time compares (PyTorch, XLA and TensorFlow name and fuse their work differently, but
all of them multiply matrices, convolve, normalise and copy).

`CLASSES` is the taxonomy, in the order tables and charts show it; `RULES` says, for each class, the
words in a kernel's name that put it there (cuBLAS/cuBLASLt, CUTLASS, cuDNN, PyTorch's native kernels,
Triton, XLA fusions and custom calls, TensorFlow/Eigen, MIOpen/rocBLAS/hipBLASLt, NCCL/RCCL). A name
takes the first class whose rule matches it, so the specific rules come first (a cuDNN `dgrad`
implicit GEMM is a convolution, not a matrix multiply; a CUTLASS GEMM whose template arguments name
a `Copy_Atom` is a matrix multiply, not a copy). Rules read the name without its parameter list
(`kernel_names.key`: CUPTI's mangled symbols demangled), so `(cudnnTensorStruct, float*)` says nothing.

`classify` is vectorised: the distinct names of a column are classified once each (`classify_distinct`,
Python's `re`, a few thousand names at most) and the classes spread back to the rows in Arrow.
`with_classes` adds the `kernel_class` column to a kernels table at read time, so every run folder, old
or new, has it. Memory operations of the memcpy table (copies and sets the runtime did without a kernel)
count as `memory` wherever GPU time is split by class. The rules are written in the syntax Python's `re`
and RE2 share (a test reads them with both, on every fixture's kernel names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyzers.trace import kernel_names

if TYPE_CHECKING:  # Arrow only where a column is classified: `tracer analyze FILE` names classes without it
    import pyarrow as pa

KERNEL_CLASS = "kernel_class"
"""The column `with_classes` adds to a kernels table: one of `CLASSES`' keys."""


@dataclass(frozen=True)
class KernelClass:
    key: str  # column value, JSON key
    label: str  # as tables and charts say it
    colour: str  # '#RRGGBB' in every chart (related classes in related hues; "other" grey)


CLASSES: tuple[KernelClass, ...] = (
    KernelClass("matmul", "matrix multiply", "#1F77B4"),
    KernelClass("conv_fwd", "convolution, forward", "#D62728"),
    KernelClass("conv_bwd_data", "convolution, backward data", "#FF7F0E"),
    KernelClass("conv_bwd_filter", "convolution, backward filter", "#E377C2"),
    KernelClass("conv", "convolution (direction not in the name)", "#8C564B"),
    KernelClass("attention", "attention", "#9467BD"),
    KernelClass("elementwise", "element-wise", "#2CA02C"),
    KernelClass("fused", "fused element-wise (XLA, Triton)", "#98DF8A"),
    KernelClass("reduction", "reduction and pooling", "#17BECF"),
    KernelClass("normalization", "normalisation", "#BCBD22"),
    KernelClass("softmax_loss", "softmax and loss", "#FFBB78"),
    KernelClass("optimizer", "optimizer update", "#AEC7E8"),
    KernelClass("indexing", "gather, scatter, embedding, sort", "#C5B0D5"),
    KernelClass("memory", "memory copy, set and layout", "#C49C94"),
    KernelClass("communication", "communication (NCCL, RCCL)", "#393B79"),
    KernelClass("other", "other", "#7F7F7F"),
)
BY_KEY = {c.key: c for c in CLASSES}
OTHER = "other"
MEMORY = "memory"
OTHER_LIMIT = 0.05
"""The share of kernel time in `other` the classifier is held to on every fixture (tests)."""

_CONV = r"conv([^e]|$)|fprop|xmma_fprop|implicit_convolve|scudnn|winograd|fft2d_|fft_|cudnn::cnn::|cask_cudnn"
# (class, pattern, case-insensitive), first match wins: see the module docstring.
RULES: tuple[tuple[str, str], ...] = (
    # NCCL (both eras: ncclKernel_*, ncclDevKernel_*), RCCL, MSCCL, NVSHMEM; expert-parallel all-to-all (DeepEP,
    # as `deep_ep::` and DeepSeek's `dpsk::ep::`, pplx, MoE dispatch/combine); custom all-reduce (vLLM's and
    # SGLang's `cross_device_reduce_*`, TensorRT-LLM's one- and two-shot kernels)
    ("communication", r"nccl|rccl|msccl|nvshmem|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|all2all|sendrecv"
     r"|cross_device_reduce|deep_?ep::|dpsk::ep|internode::|intranode::|notify_dispatch|cached_notify"
     r"|pplx|moe_?(dispatch|combine)|ep_?(dispatch|combine)"),
    # KV-cache writes and block moves (vLLM, SGLang): memory, though they serve attention
    ("memory", r"reshape_and_cache|copy_blocks|swap_blocks|concat_and_cache|store_kvcache|kv_?cache_?(copy|store)"),
    # FlashAttention 2/3 (`flash_fwd_*`, `flash::FlashAttnFwdSm90`), cuDNN/TE fused attention, xFormers/CK fmha,
    # paged and Triton attention (vLLM's ROCm `_fwd_kernel` prefix-prefill, `_attn_fwd`, unified attention)
    ("attention", r"flash|fmha|attention|attn|sdpa|_mha|mha_|softmax_?gemm|^_(fwd|bwd)_kernel|paged_?attention"
     r"|decode_?attention|mla_?(decode|fwd)|_attn_"),
    ("conv_bwd_filter", r"wgrad|_wrw|wrw_|bwd_?filter|backward_?filter|backpropfilter|bwdweights|conv.*weight_?grad"),
    ("conv_bwd_data", r"dgrad|igemm_bwd|bwd_?data|backward_?data|backpropinput|conv_?bwd|conv.*input_?grad"),
    ("conv_fwd", r"fprop|conv_?fwd|convfwd|forward_?conv|implicit_convolve|conv2d_grouped_direct|igemm_fwd"),
    ("conv", _CONV),
    # fbgemm's name holds "gemm" but most of its kernels are not matrix multiplies (`fbgemm_gpu::permute_*`)
    ("memory", r"fbgemm_gpu::(permute|.*transpose|.*_to_|.*copy|.*pad)"),
    ("indexing", r"fbgemm_gpu::.*(embedding|index|gather|scatter|lengths|offsets|bucketize|jagged)"),
    # cuBLAS/cuBLASLt (`nvjet_*`, `sm90_xmma_gemm_*`), CUTLASS, Tensile (`Cijk_*`: rocBLAS, hipBLASLt), CK,
    # vLLM's ROCm skinny GEMMs (`wvSplitK*`, `LLGemm*`), Marlin/Machete/DeepGEMM, Triton's MoE and GEMM templates
    ("matmul", r"(^|[^b])gemm|gemv|nvjet|cijk_|cublas|cutlass|xmma|matmul|bmm|addmm|_mm_|triton_tem_|dot_kernel"
     r"|dot_fusion|splitkreduce|wgmma|hipblaslt|rocblas|epilogue::impl|wvsplitk|llgemm|marlin|machete|scaled_mm"
     r"|fused_moe_kernel|gptq|awq_"),
    # PyTorch, Apex (`cuApplyLayerNorm`, `cuComputePartGradGammaBeta`), Transformer Engine (`rmsnorm_fwd_*`,
    # `ln_bwd_*`), vLLM (`rms_norm_kernel`, `fused_add_rms_norm_kernel`) and Triton's fused RMSNorm (a reduction
    # whose fused ops end in `rsqrt`): the same op in one class whatever made it
    ("normalization", r"batch_?norm|bn_fw|bn_bw|layer_?norm|rms_?norm|group_?norm|instance_?norm|welford|lrn_"
     r"|norm_kernel|_norm_|normalization|gammabeta|gamma_beta|cuapplylayernorm|cuapplyrmsnorm|ln_(fwd|bwd)"
     r"|^triton_(red|per)_fused.*(mean|sum|var).*rsqrt"),
    ("softmax_loss", r"softmax|cross_?entropy|nll|criterion|_loss|loss_|mse_|bce_|sigmoid_?cross"
     r"|generatenormalizedprob"),
    ("reduction", r"^triton_(red|per)_"),  # Triton says what a kernel is in its first word (pointwise, reduction)
    ("fused", r"^triton_poi_"),
    ("optimizer", r"multi_tensor_apply|adam|sgd|lamb_|adagrad|rmsprop|_foreach|optimizer|apply_?momentum"
     r"|applygradient|applymomentum"),
    ("elementwise", r"tensorcwise|rotary|_rope|rope_"),  # Eigen's element-wise ops (TensorFlow), whose functor may say
    # `sum`; rotary position embedding (vLLM's `rotary_embedding_kernel`; Triton's is a fused pointwise kernel)
    ("memory", r"copy|memcpy|memset|nchwtonhwc|nhwctonchw|transpose|permute|catarray|concat|fillfunctor|fill_"
     r"|fillbuffer|swapdimension|shuffle|_pad|pad_|layout|nchw2|nhwc2|zero_"),
    ("indexing", r"index|gather|scatter|embedding|embed|sort|radix|unique|nonzero|masked_select|masked_scatter|topk"
     r"|cub::device|arange|searchsorted|bucketize|histogram|indices|moe_align"),
    ("reduction", r"reduce|reduction|_sum|sum_|mean|argmax|argmin|pool|cumsum|scan|std_var|var_mean|norm_|average"),
    ("fused", r"fusion|triton_"),
    ("elementwise", r"elementwise|eltwise|unary|binary|pointwise|vectorized|functor|relu|sigmoid|tanh|gelu|silu"
     r"|threshold|clamp|dropout|distribution|random|philox|normal|uniform|add|mul|div|sub|exp|log|sqrt|pow|cast"
     r"|convert|scale|bias|activation|eigenmetakernel|where|compare|abs|neg|sign|cos|sin|tensorop|op2dtensor|scal_kernel"
     r"|act_and_mul|quant"),
)  # fmt: skip
assert {c for c, _ in RULES} | {OTHER} == set(BY_KEY), "every class has a rule, every rule a class"
_COMPILED = tuple((cls, re.compile(pattern, re.IGNORECASE)) for cls, pattern in RULES)


def classify(names: pa.Array | pa.ChunkedArray | Iterable[str]) -> pa.Array:
    """The class key of every name (a string array of the same length)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracer.core import arrow_build

    array = names if isinstance(names, (pa.Array, pa.ChunkedArray)) else arrow_build.strings(list(names))
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else arrow_build.strings([])
    if isinstance(array.type, pa.DictionaryType):
        array = array.cast(pa.string())
    encoded = pc.dictionary_encode(array.fill_null(arrow_build.string_scalar("")))
    distinct = encoded.dictionary
    classes = classify_distinct(distinct.to_pylist())
    return pc.take(arrow_build.strings(classes), encoded.indices)


def classify_distinct(names: list[str]) -> list[str]:
    """The class of each of `names`: the first rule that matches its key, else OTHER."""
    return [_class_of(kernel_names.key(n)) for n in names]


def _class_of(key: str) -> str:
    return next((cls for cls, pattern in _COMPILED if pattern.search(key)), OTHER)


def with_classes(table: pa.Table, name_column: str = "name") -> pa.Table:
    """`table` with the `kernel_class` column (computed from its names; replaced if already there)."""
    classes = classify(table[name_column])
    if KERNEL_CLASS in table.column_names:
        table = table.drop_columns([KERNEL_CLASS])
    return table.append_column(KERNEL_CLASS, classes)


def label(key: str) -> str:
    return BY_KEY[key].label


def order(key: str) -> int:
    """Position of a class in `CLASSES` (tables and charts list classes in this order)."""
    return next(i for i, c in enumerate(CLASSES) if c.key == key)


def class_totals(table: pa.Table, name_column: str = "name", duration_column: str = "dur_ns") -> dict[str, int]:
    """Summed durations by class of a table of kernels (rows need a name and a duration)."""
    import pyarrow as pa

    if table.num_rows == 0:
        return {}
    grouped = (
        pa.table({KERNEL_CLASS: classify(table[name_column]), "d": table[duration_column]})
        .group_by(KERNEL_CLASS)
        .aggregate([("d", "sum")])
    )
    return {k: int(v) for k, v in zip(grouped[KERNEL_CLASS].to_pylist(), grouped["d_sum"].to_pylist())}
