"""The built-in models' FLOPs, counted once from their layer description (tracer.worker.model_flops), held
to each framework's own counter, run on the model exactly as that framework's worker builds it (64 px,
one image, in the framework's interpreter): PyTorch's FlopCounterMode within 2 %, TensorFlow's profiler
within 5 %, JAX/XLA's cost analysis within 5 % of the same layers counted as XLA counts them (without the
zero padding; MobileNetV2 12 %: its elementwise ops), Paddle's `paddle.flops`
(the forward pass's multiply-adds) within 5 %. Where a counter is known to be wrong (grouped convolutions'
backward), the test says how and corrects or leaves out that case; docs/guide/flops.md lists the gaps."""

from __future__ import annotations

import functools
import json

import pytest

from tests.conftest import require_framework
from tests.tracer.worker.helpers import run_in_framework
from tracer.core.model_flops import MODELS, layers, model_flops
from tracer.core.options import MODELS as OPTION_MODELS

SIZE = 64

# torchvision's documented "GFLOPS" of each model (its weights' metadata: multiply-adds, 224 px, 1000 classes).
TORCHVISION_GMACS = {"alexnet": 0.71, "mobilenet_v2": 0.30, "resnet50": 4.09, "vgg16": 15.47}


def test_every_built_in_model_is_described() -> None:
    assert set(MODELS) == set(OPTION_MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_forward_multiply_adds_are_torchvisions_documented_figure(model: str) -> None:
    forward = model_flops(model, 224, 1000).forward
    assert round(forward / 2 / 1e9, 2) == TORCHVISION_GMACS[model]


def test_training_is_forward_plus_twice_forward_but_the_first_layers_input() -> None:
    counted = model_flops("resnet50", SIZE, 3)
    first = 2 * 64 * 3 * 7 * 7 * (SIZE // 2) ** 2  # conv1's multiply-adds for one image, 2 FLOPs each
    assert counted.backward == 2 * counted.forward - first
    assert counted.training == counted.forward + counted.backward


def test_an_image_too_small_for_the_model_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="too small"):
        model_flops("alexnet", 16, 3)


TORCH = """
import json, sys
import torch
from torch.utils.flop_counter import FlopCounterMode, conv_backward_flop
from tracer.worker.models.pytorch import build_model

def grouped_fixed(grad_out, x, w, bias, stride, padding, dilation, transposed, output_padding, groups, mask,
                  out_shape=None, **kwargs):
    # FlopCounterMode counts a grouped convolution's weight gradient `groups` times over (pytorch/pytorch#183405);
    # its input gradient is right. (conv_backward_flop is the registered, shape-wrapped formula: it takes out_val.)
    args = (grad_out, x, w, bias, stride, padding, dilation, transposed, output_padding, groups)
    grad_input = conv_backward_flop(*args, [mask[0], False], out_val=out_shape)
    grad_weight = conv_backward_flop(*args, [False, mask[1]], out_val=out_shape) // groups
    return grad_input + grad_weight

for name in sys.argv[2:]:
    torch.manual_seed(0)
    model = build_model(name, 3).train()
    x, y = torch.randn(1, 3, int(sys.argv[1]), int(sys.argv[1])), torch.tensor([0])
    counts = {}
    for fixed in (False, True):
        mapping = {torch.ops.aten.convolution_backward: grouped_fixed} if fixed else {}
        with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        counts[fixed] = counter.get_total_flops()
    print(json.dumps({"model": name, "as_is": counts[False], "fixed": counts[True]}), flush=True)
"""


@functools.cache
def torch_counts() -> dict[str, dict[str, int]]:
    out = run_in_framework("pytorch", TORCH, str(SIZE), *MODELS)
    return {r["model"]: r for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_pytorch_flop_counter_mode_agrees_within_two_percent(model: str) -> None:
    require_framework("pytorch")
    found = torch_counts()[model]
    ours = model_flops(model, SIZE, 3).training
    assert abs(ours / found["fixed"] - 1) < 0.02, (model, ours, found)
    if model == "mobilenet_v2":  # its depthwise convolutions: the counter as shipped counts them ~7x over
        assert found["as_is"] > 5 * found["fixed"], found
    else:
        assert found["as_is"] == found["fixed"]


TENSORFLOW = """
import json, sys
import tensorflow as tf
from tracer.worker.models.tensorflow import MODELS

size = int(sys.argv[1])
for name in sys.argv[2:]:
    model = MODELS[name](size, 3)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        return tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function(tf.zeros((1, size, size, 3)), tf.constant([0])).graph
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    flops = tf.compat.v1.profiler.profile(graph=graph, options=options).total_float_ops
    print(json.dumps({"model": name, "flops": flops}), flush=True)
"""


@pytest.mark.slow
def test_tensorflow_profiler_float_ops_agree_within_five_percent() -> None:
    """The profiler counts every float operation of the step's graph (bias adds, BatchNorm, activations too)."""
    require_framework("tensorflow")
    out = run_in_framework("tensorflow", TENSORFLOW, str(SIZE), *MODELS)
    found = {r["model"]: r["flops"] for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
    for model in MODELS:
        ours = model_flops(model, SIZE, 3).training
        assert abs(found[model] / ours - 1) < 0.05, (model, found[model], ours)


JAX = """
import json, sys
import jax, jax.numpy as jnp, optax
from tracer.worker.models.jax import MODELS

def cost(fn, *args):
    found = jax.jit(fn).lower(*args).compile().cost_analysis()
    return (found[0] if isinstance(found, list) else found)["flops"]

batch, size = int(sys.argv[1]), int(sys.argv[2])
for name in sys.argv[3:]:
    model = MODELS[name](3)
    x, y = jax.ShapeDtypeStruct((batch, size, size, 3), jnp.float32), jax.ShapeDtypeStruct((batch,), jnp.int32)
    variables = jax.eval_shape(lambda x: model.init({"params": jax.random.PRNGKey(0)}, x, train=False), x)
    params = variables["params"]
    rest = {k: v for k, v in variables.items() if k != "params"}

    def forward(params, rest, x):
        return model.apply({"params": params, **rest}, x, train=False)

    def gradients(params, rest, x, y):  # forward and backward, as FlopCounterMode sees loss.backward()
        def loss(p):
            logits, _ = model.apply({"params": p, **rest}, x, train=True, mutable=list(rest),
                                    rngs={"dropout": jax.random.PRNGKey(1)})
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return jax.grad(loss)(params)

    found = {"forward": cost(forward, params, rest, x), "training": cost(gradients, params, rest, x, y)}
    print(json.dumps({"model": name, **found}), flush=True)
"""
# Two images, not one: with one, XLA rewrites each fully-connected layer's weight gradient (a product over a
# dimension of 1) as an elementwise multiply and counts it 1 FLOP a product instead of 2 (AlexNet: -11 %).
JAX_BATCH = 2
# XLA's own excess on each model's forward + backward over the convention (BatchNorm, activations, pooling
# and the loss: every elementwise op 1 FLOP), measured at 64 px, two images, 6 Dec 2026: AlexNet +0.3 %,
# ResNet-50 +2.3 %, VGG16 +0.2 %, MobileNetV2 +10 % (BatchNorm and ReLU6 over its wide expanded layers,
# whose convolutions are cheap: its forward alone is +8 %).
JAX_TOLERANCE = {"alexnet": 0.05, "mobilenet_v2": 0.12, "resnet50": 0.05, "vgg16": 0.05}


def xla_convention(model: str, size: int) -> tuple[int, int]:
    """Forward and training FLOPs of one image as XLA counts them: without the multiply-adds with the zero
    padding, and each grouped convolution's weight gradient counted as a full convolution (`groups` times
    over: MobileNetV2's depthwise layers, ~6x its step)."""
    counted = model_flops(model, size, 3, padding=False)
    full_weight_gradients = sum(2 * (layer.groups - 1) * layer.image_macs for layer in layers(model, size, 3))
    return counted.forward, counted.training + full_weight_gradients


@pytest.mark.slow
def test_jax_cost_analysis_agrees_where_the_conventions_meet() -> None:
    """XLA's count differs from FlopCounterMode's by convention, not by error: it leaves out the taps on
    the zero padding (ResNet-50 at 64 px: -11 %; `test_xla_counts_the_taps_inside_the_image` holds that
    exactly) and counts elementwise ops. So it is held to the description without the padding."""
    require_framework("jax")
    out = run_in_framework("jax", JAX, str(JAX_BATCH), str(SIZE), *MODELS)
    rows = {r["model"]: r for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
    assert set(rows) == set(MODELS)
    for model, r in rows.items():
        forward, training = (JAX_BATCH * n for n in xla_convention(model, SIZE))
        assert abs(r["forward"] / forward - 1) < 0.05, (model, r, forward)
        assert abs(r["training"] / training - 1) < JAX_TOLERANCE[model], (model, r, training)


JAX_CONV = """
import json, sys
import jax, jax.numpy as jnp

def cost(fn, *args):
    found = jax.jit(fn).lower(*args).compile().cost_analysis()
    return (found[0] if isinstance(found, list) else found)["flops"]

for case in sys.argv[1:]:
    cin, cout, k, s, p, h = (int(v) for v in case.split(","))
    conv = lambda x, w: jax.lax.conv_general_dilated(x, w, (s, s), ((p, p), (p, p)),
                                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x, w = jax.ShapeDtypeStruct((1, h, h, cin), jnp.float32), jax.ShapeDtypeStruct((k, k, cin, cout), jnp.float32)
    o = jax.eval_shape(conv, x, w)
    ones = jnp.ones(o.shape)
    found = {
        "forward": cost(conv, x, w),
        "input_gradient": cost(lambda x, w: jax.vjp(lambda x: conv(x, w), x)[1](ones)[0], x, w),
        "weight_gradient": cost(lambda x, w: jax.vjp(lambda w: conv(x, w), w)[1](ones)[0], x, w),
    }
    print(json.dumps({"case": case, **found}), flush=True)
"""
# The built-in models' kinds of convolution: (in, out, kernel, stride, padding, image): ResNet-50's first
# layer, its 3x3 and strided 3x3, AlexNet's first layer at 64 px, a 3x3 on a 3 px map (VGG16's last stage at
# 64 px is 4 px, then 2: padding is 5/9 of the taps on a 3 px map's border).
CONV_CASES = ["3,64,7,2,3,64", "64,64,3,1,1,16", "64,64,3,2,1,16", "3,64,11,4,2,64", "32,32,3,1,1,3"]


def taps_inside(size: int, kernel: int, stride: int, pad: int) -> int:
    """Along one dimension, counted one by one: the kernel taps over every output position that land
    inside the image (not on its zero padding)."""
    outputs = (size + 2 * pad - kernel) // stride + 1
    return sum(1 for o in range(outputs) for j in range(kernel) if 0 <= o * stride - pad + j < size)


@pytest.mark.slow
def test_xla_counts_the_taps_inside_the_image() -> None:
    """Why XLA's count is below FlopCounterMode's: of a convolution's forward, input gradient and weight
    gradient alike, it counts exactly the multiply-adds whose input is inside the image, 2 FLOPs each."""
    require_framework("jax")
    out = run_in_framework("jax", JAX_CONV, *CONV_CASES)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(rows) == len(CONV_CASES)
    for r in rows:
        cin, cout, k, s, p, h = (int(v) for v in r["case"].split(","))
        inside = 2 * cin * cout * taps_inside(h, k, s, p) ** 2
        every = 2 * cin * cout * k * k * ((h + 2 * p - k) // s + 1) ** 2
        assert r["forward"] == r["input_gradient"] == r["weight_gradient"] == inside, (r, inside)
        assert (inside < every) == (p > 0), (r, every)


PADDLE = """
import json, sys
import paddle
from paddle.hapi import dynamic_flops
from tracer.worker.models.paddle import build_model

def count(model, size):
    # paddle.flops' own per-layer counters, summed as it sums them: paddle.flops itself fails in this Paddle
    # after counting, at its summary table (int() of a parameter-count buffer that is not a scalar).
    def add(m):
        hook = dynamic_flops.register_hooks.get(type(m))
        if hook is not None and not list(m.children()):
            m.register_buffer("total_ops", paddle.zeros([1], dtype="int64"))
            m.register_forward_post_hook(hook)
    model.eval()
    model.apply(add)
    with paddle.no_grad():
        model(paddle.zeros([1, 3, size, size]))
    return sum(int(m.total_ops.sum()) for m in model.sublayers() if "total_ops" in m._buffers)

for name in sys.argv[2:]:
    print(json.dumps({"model": name, "flops": count(build_model(name, 3), int(sys.argv[1]))}), flush=True)
"""


@pytest.mark.slow
def test_paddle_flops_agrees_on_the_forward_pass() -> None:
    """`paddle.flops` counts the forward pass's multiply-adds (one each, not two), BatchNorm and activations
    too (MobileNetV2: +4.5 %)."""
    require_framework("paddle")
    out = run_in_framework("paddle", PADDLE, str(SIZE), *MODELS)
    found = {r["model"]: r["flops"] for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
    for model in MODELS:
        ours = model_flops(model, SIZE, 3).forward / 2
        assert abs(found[model] / ours - 1) < 0.05, (model, found[model], ours)
