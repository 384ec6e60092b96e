"""JAX's models: Flax (linen) modules that mirror torchvision layer for layer.

Flax has no model zoo, so AlexNet, MobileNetV2, ResNet-50 and VGG16 are written here from torchvision's
definitions (channels last; torchvision's padding, pooling, BatchNorm placement, initialisers and adaptive
average pooling), so that the parameter counts match and do not depend on the image size.
"""

from typing import Any, Dict, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from tracer.worker.models import ParamCount
from tracer.worker.workload import MOBILENET_V2_SETTINGS, adaptive_pool_matrix

# torchvision's initialisers, as variance-scaling initialisers.
KAIMING_FAN_OUT = nn.initializers.variance_scaling(2.0, "fan_out", "normal")  # kaiming_normal_(mode="fan_out")
TORCH_DEFAULT = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")  # kaiming_uniform_(a=sqrt(5))
LINEAR_SMALL = nn.initializers.normal(0.01)  # normal_(0, 0.01)


def _pad(p: int) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    """torch's symmetric `padding=p` (Flax's "SAME" pads stride-2 convolutions differently)."""
    return ((p, p), (p, p))


class AdaptiveAvgPool(nn.Module):
    """torch.nn.AdaptiveAvgPool2d for NHWC input: separable, two constant matrices (workload.py)."""

    size: int

    @nn.compact
    def __call__(self, x: Any) -> Any:
        rows = jnp.asarray(adaptive_pool_matrix(x.shape[1], self.size), dtype=x.dtype)
        cols = jnp.asarray(adaptive_pool_matrix(x.shape[2], self.size), dtype=x.dtype)
        return jnp.einsum("oh,bhwc,pw->bopc", rows, x, cols)


def _max_pool(x: Any, window: int, stride: int, padding: int = 0) -> Any:
    """torch.nn.MaxPool2d (floor mode; padding counts as -inf, as in torch)."""
    return nn.max_pool(x, (window, window), strides=(stride, stride), padding=_pad(padding))


class AlexNet(nn.Module):
    """torchvision.models.alexnet; torch's default initialisers (biases start at zero here)."""

    num_classes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: Any, train: bool) -> Any:
        conv = lambda f, k, s, p: nn.Conv(  # noqa: E731
            f, (k, k), (s, s), _pad(p), kernel_init=TORCH_DEFAULT, dtype=self.dtype
        )
        x = _max_pool(nn.relu(conv(64, 11, 4, 2)(x)), 3, 2)
        x = _max_pool(nn.relu(conv(192, 5, 1, 2)(x)), 3, 2)
        x = nn.relu(conv(384, 3, 1, 1)(x))
        x = nn.relu(conv(256, 3, 1, 1)(x))
        x = _max_pool(nn.relu(conv(256, 3, 1, 1)(x)), 3, 2)
        x = AdaptiveAvgPool(6)(x)
        x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)  # torch.flatten of NCHW: same feature order
        dense = lambda f: nn.Dense(f, kernel_init=TORCH_DEFAULT, dtype=self.dtype)  # noqa: E731
        x = nn.Dropout(0.5, deterministic=not train)(x)
        x = nn.relu(dense(4096)(x))
        x = nn.Dropout(0.5, deterministic=not train)(x)
        x = nn.relu(dense(4096)(x))
        return dense(self.num_classes)(x)


VGG16_LAYERS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG16(nn.Module):
    """torchvision.models.vgg16 (configuration "D", no BatchNorm)."""

    num_classes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: Any, train: bool) -> Any:
        for layer in VGG16_LAYERS:
            if layer == "M":
                x = _max_pool(x, 2, 2)
            else:
                x = nn.relu(nn.Conv(layer, (3, 3), padding=_pad(1), kernel_init=KAIMING_FAN_OUT, dtype=self.dtype)(x))
        x = AdaptiveAvgPool(7)(x)
        x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)
        dense = lambda f: nn.Dense(f, kernel_init=LINEAR_SMALL, dtype=self.dtype)  # noqa: E731
        x = nn.Dropout(0.5, deterministic=not train)(nn.relu(dense(4096)(x)))
        x = nn.Dropout(0.5, deterministic=not train)(nn.relu(dense(4096)(x)))
        return dense(self.num_classes)(x)


def _batch_norm(train: bool, dtype: Any) -> Any:
    """torch.nn.BatchNorm2d: eps 1e-5, running-average momentum 0.1 (Flax counts it the other way)."""
    return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, dtype=dtype)


class Bottleneck(nn.Module):
    """torchvision's ResNet Bottleneck (v1.5: the stride is on the 3x3 convolution)."""

    width: int
    stride: int
    downsample: bool
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: Any, train: bool) -> Any:
        conv = lambda f, k, s, p: nn.Conv(  # noqa: E731
            f, (k, k), (s, s), _pad(p), use_bias=False, kernel_init=KAIMING_FAN_OUT, dtype=self.dtype
        )
        out = nn.relu(_batch_norm(train, self.dtype)(conv(self.width, 1, 1, 0)(x)))
        out = nn.relu(_batch_norm(train, self.dtype)(conv(self.width, 3, self.stride, 1)(out)))
        out = _batch_norm(train, self.dtype)(conv(self.width * 4, 1, 1, 0)(out))
        identity = x
        if self.downsample:
            identity = _batch_norm(train, self.dtype)(conv(self.width * 4, 1, self.stride, 0)(x))
        return nn.relu(out + identity)


class ResNet50(nn.Module):
    """torchvision.models.resnet50: stages of 3, 4, 6, 3 bottlenecks; fc with torch's default init."""

    num_classes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: Any, train: bool) -> Any:
        x = nn.Conv(64, (7, 7), (2, 2), _pad(3), use_bias=False, kernel_init=KAIMING_FAN_OUT, dtype=self.dtype)(x)
        x = _max_pool(nn.relu(_batch_norm(train, self.dtype)(x)), 3, 2, 1)
        channels = 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                s = stride if i == 0 else 1
                x = Bottleneck(width, s, s != 1 or channels != width * 4, self.dtype)(x, train)
                channels = width * 4
        x = jnp.mean(x, axis=(1, 2))  # AdaptiveAvgPool2d((1, 1)) + flatten
        return nn.Dense(self.num_classes, kernel_init=TORCH_DEFAULT, dtype=self.dtype)(x)


class ConvBNReLU6(nn.Module):
    """torchvision's Conv2dNormActivation with ReLU6 (bias-free convolution, BatchNorm)."""

    features: int
    kernel: int
    stride: int
    groups: int = 1
    activation: bool = True
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: Any, train: bool) -> Any:
        pad = (self.kernel - 1) // 2
        x = nn.Conv(
            self.features,
            (self.kernel, self.kernel),
            (self.stride, self.stride),
            _pad(pad),
            feature_group_count=self.groups,
            use_bias=False,
            kernel_init=KAIMING_FAN_OUT,
            dtype=self.dtype,
        )(x)
        x = _batch_norm(train, self.dtype)(x)
        return nn.relu6(x) if self.activation else x


class MobileNetV2(nn.Module):
    """torchvision.models.mobilenet_v2 at width 1.0 (every channel count is already a multiple of 8)."""

    num_classes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: Any, train: bool) -> Any:
        x = ConvBNReLU6(32, 3, 2, dtype=self.dtype)(x, train)
        channels = 32
        for expand, out, repeats, stride in MOBILENET_V2_SETTINGS:
            for i in range(repeats):
                s = stride if i == 0 else 1
                hidden = int(round(channels * expand))
                y = x
                if expand != 1:
                    y = ConvBNReLU6(hidden, 1, 1, dtype=self.dtype)(y, train)
                y = ConvBNReLU6(hidden, 3, s, groups=hidden, dtype=self.dtype)(y, train)
                y = ConvBNReLU6(out, 1, 1, activation=False, dtype=self.dtype)(y, train)
                x = x + y if s == 1 and channels == out else y
                channels = out
        x = ConvBNReLU6(1280, 1, 1, dtype=self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        x = nn.Dropout(0.2, deterministic=not train)(x)
        return nn.Dense(self.num_classes, kernel_init=LINEAR_SMALL, dtype=self.dtype)(x)


MODELS: Dict[str, Any] = {"alexnet": AlexNet, "mobilenet_v2": MobileNetV2, "resnet50": ResNet50, "vgg16": VGG16}


def _size(tree: Any) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(tree))


def count_params(variables: Any) -> ParamCount:
    """Trainable: "params" (BatchNorm scale and bias included, as torch counts them); total adds the
    running statistics ("batch_stats"). torch's num_batches_tracked counters have no counterpart."""
    trainable = _size(variables["params"])
    return ParamCount(trainable, trainable + _size(variables.get("batch_stats", {})))


def model_params(name: str, num_classes: int = 3, image_size: int = 224) -> ParamCount:
    """For the parity test: the counts of the model exactly as a run builds it (shapes only)."""
    model = MODELS[name](num_classes)
    x = jax.ShapeDtypeStruct((1, image_size, image_size, 3), jnp.float32)
    shapes = jax.eval_shape(lambda key, x: model.init({"params": key}, x, train=False), jax.random.PRNGKey(0), x)
    return count_params(shapes)
