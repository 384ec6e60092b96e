"""The built-in models' FLOPs, counted once from their layer description (tracer.worker.model_flops), held
to each framework's own counter, run on the model exactly as that framework's worker builds it (64 px,
one image, in the framework's interpreter): PyTorch's FlopCounterMode within 2 %, TensorFlow's profiler
within 5 %, JAX/XLA's cost analysis within 5 % (forward) and 7 % (training step), Paddle's `paddle.flops`
(the forward pass's multiply-adds) within 5 %. Where a counter is known to be wrong (grouped convolutions'
backward), the test says how and corrects or leaves out that case; docs/guide/flops.md lists the gaps."""

from __future__ import annotations

import functools
import json

import pytest

from tests.conftest import require_framework
from tests.tracer.worker.helpers import run_in_framework
from tracer.core.model_flops import MODELS, model_flops
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

for name, size, what in (a.split(":") for a in sys.argv[1:]):
    size = int(size)
    model = MODELS[name](3)
    x, y = jax.ShapeDtypeStruct((1, size, size, 3), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.int32)
    variables = jax.eval_shape(lambda x: model.init({"params": jax.random.PRNGKey(0)}, x, train=False), x)
    params = variables["params"]
    rest = {k: v for k, v in variables.items() if k != "params"}

    def forward(params, rest, x):
        return model.apply({"params": params, **rest}, x, train=False)

    def step(params, rest, x, y):
        def loss(p):
            logits, _ = model.apply({"params": p, **rest}, x, train=True, mutable=list(rest),
                                    rngs={"dropout": jax.random.PRNGKey(1)})
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        grads = jax.grad(loss)(params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.001 * g, params, grads)

    flops = cost(forward, params, rest, x) if what == "forward" else cost(step, params, rest, x, y)
    print(json.dumps({"model": name, "what": what, "size": size, "flops": flops}), flush=True)
"""
# The training step at 224 px: XLA leaves out the multiply-adds with the zero padding, a share that grows as
# the image shrinks (VGG16 at 64 px: 8 %); only shapes are compiled, nothing runs. MobileNetV2's step is
# left out: XLA's cost analysis counts its depthwise weight gradients as full convolutions (~6x over).
JAX_CASES = [f"{m}:{SIZE}:forward" for m in MODELS] + [f"{m}:224:training" for m in MODELS if m != "mobilenet_v2"]


@pytest.mark.slow
def test_jax_cost_analysis_agrees() -> None:
    require_framework("jax")
    out = run_in_framework("jax", JAX, *JAX_CASES)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(rows) == len(JAX_CASES)
    for r in rows:
        if r["what"] == "forward":  # against the count without padding, as XLA counts it
            ours = model_flops(r["model"], r["size"], 3, padding=False).forward
            assert abs(r["flops"] / ours - 1) < 0.05, r
        else:  # against FlopCounterMode's convention (padding counted)
            ours = model_flops(r["model"], r["size"], 3).training
            assert abs(r["flops"] / ours - 1) < 0.07, r


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
