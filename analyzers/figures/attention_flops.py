"""FLOPs of PyTorch's fused attention operators from their recorded input dimensions (a Kineto trace's
`Input Dims`), by FlopCounterMode's convention, declared here once:

- forward: the two products of attention, scores = Q K^T and out = scores V: 2 B H Sq Sk (D + Dv) FLOPs
  (4 B H S^2 D where the lengths and widths are equal; the softmax, scaling and masking not counted);
- backward: twice the forward (the gradients of V, of the scores, of Q and of K: four products as large as
  the forward's two); a flash kernel's recomputation of the scores is not counted, as FlopCounterMode
  does not count it.

Each operator's layout is declared with its name: the `_scaled_dot_product_*` operators take (batch,
heads, sequence, width), the lower `_flash_attention_*` and `_efficient_attention_*` (batch, sequence,
heads, width). Variable-length (nested, packed) inputs have no batch dimension and are not counted.
"""

from __future__ import annotations

BACKWARD_FACTOR = 2  # a backward's FLOPs over its forward's (see the docstring)

BHSD, BSHD = "bhsd", "bshd"
#: forward operators: name -> the layout of their query, key and value (Input Dims 0, 1, 2)
FORWARD = {
    "aten::scaled_dot_product_attention": BHSD,
    "aten::_scaled_dot_product_attention_math": BHSD,
    "aten::_scaled_dot_product_flash_attention": BHSD,
    "aten::_scaled_dot_product_flash_attention_for_cpu": BHSD,
    "aten::_scaled_dot_product_efficient_attention": BHSD,
    "aten::_scaled_dot_product_cudnn_attention": BHSD,
    "aten::_flash_attention_forward": BSHD,
    "aten::_efficient_attention_forward": BSHD,
}
#: backward operators: name -> layout of their query, key and value (Input Dims 1, 2, 3: the output's
#: gradient comes first)
BACKWARD = {
    "aten::_scaled_dot_product_flash_attention_backward": BHSD,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": BHSD,
    "aten::_scaled_dot_product_efficient_attention_backward": BHSD,
    "aten::_scaled_dot_product_cudnn_attention_backward": BHSD,
    "aten::_flash_attention_backward": BSHD,
    "aten::_efficient_attention_backward": BSHD,
}


def _forward(q: list[int], k: list[int], v: list[int], layout: str) -> int | None:
    if not (len(q) == len(k) == len(v) == 4):
        return None  # packed variable-length sequences: no batch dimension to count by
    if layout == BSHD:
        q, k, v = ([x[0], x[2], x[1], x[3]] for x in (q, k, v))
    b, h, s_q, d = q
    s_k, d_v = k[2], v[3]
    return 2 * b * h * s_q * s_k * (d + d_v)


def attention_flops(name: str, dims: list[list[int]]) -> int | None:
    """One attention operator's FLOPs, or None where it is not one or its shapes do not say."""
    if name in FORWARD and len(dims) >= 3:
        return _forward(dims[0], dims[1], dims[2], FORWARD[name])
    if name in BACKWARD and len(dims) >= 4:
        forward = _forward(dims[1], dims[2], dims[3], BACKWARD[name])
        return None if forward is None else BACKWARD_FACTOR * forward
    return None
