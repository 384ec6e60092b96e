"""Why a trace of kernels without operator shapes (an nsys report, CUPTI records) has no FLOPs counted,
said from its own kernel names.

FLOPs could come from a kernel's name only where the name holds the problem it solved: a matrix product's
M, N and K, a convolution's batch, channels, image and filter. The names GPU libraries give their
matrix-multiply and convolution kernels hold their blocking instead: cuDNN's and cuBLAS's
`sm90_xmma_fprop_implicit_gemm_..._tilesize64x128x32_...`, cuBLASLt's `nvjet_tst_192x192_64x4_...`,
CUTLASS's `cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4`: the tile one thread block computes, and
one kernel of that name runs every problem it fits. Triton, XLA and TensorFlow name kernels by what they
fuse (`triton_poi_fused_...`, `loop_fusion`). None of the nsys fixtures' kernels (an H100 ResNet-18, 2-GPU
transformer runs, a CUDA sample) names a problem size, so no FLOPs are counted from names: a partial count
would read as a low MFU. The verdict says how many such kernels the trace holds and shows one name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from analyzers.trace import kernel_classes, kernel_names

#: the kernel classes whose FLOPs the convention counts (matrix products and convolutions)
COUNTED_CLASSES = frozenset({"matmul", "conv", "conv_fwd", "conv_bwd_data", "conv_bwd_filter"})
EXAMPLE_CHARS = 120
TILE = re.compile(r"\d+x\d+")  # a blocking as libraries write it: 128x64x32, 192x192_64x4, s1688 ... 256x64


def names_verdict(names: Iterable[str]) -> str:
    """Why the kernels named `names` (distinct names, as the kernels table holds them) give no FLOPs."""
    distinct = sorted(set(names))
    counted = [n for n, c in zip(distinct, kernel_classes.classify_distinct(distinct)) if c in COUNTED_CLASSES]
    if not counted:
        return "the trace has no operator shapes, and no matrix-multiply or convolution kernels"
    keys = [kernel_names.key(n) for n in counted]
    example = min([k for k in keys if TILE.search(k)] or keys, key=len)  # the shortest that shows a tile
    if len(example) > EXAMPLE_CHARS:
        example = example[:EXAMPLE_CHARS] + "..."
    return (
        f"the trace has no operator shapes, and the names of its {len(counted)} matrix-multiply and convolution"
        f" kernels say their tile sizes, not their problem sizes (e.g. {example})"
    )
