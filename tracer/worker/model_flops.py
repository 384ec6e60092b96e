"""Training FLOPs of the four built-in models, counted once from one description of their layers.

Standard library only, Python 3.6 syntax: the worker may use it, and the tool reads it through
`tracer.core.model_flops` (the one door into this module).

Convention (docs/guide/flops.md): a multiply-add is 2 FLOPs; only convolutions and fully-connected
layers are counted (what `torch.utils.flop_counter.FlopCounterMode` counts: BatchNorm, activations,
pooling and the optimizer's update are left out); a training step is the forward pass and the backward
pass, and the backward pass is counted analytically as two forward passes (the gradient of the input and
of the weights, each a convolution or product as large as the forward one) except for the first layer,
whose input needs no gradient (one forward pass). The layers are torchvision's, which every framework's
model mirrors (tracer/worker/models/).
"""

from collections import namedtuple
from typing import List  # noqa: F401 - in the type comments

from tracer.worker.workload import MOBILENET_V2_SETTINGS

# One counted layer: its kind ("conv" or "linear"), multiply-adds of its forward pass for one image (every
# kernel tap, the zero padding's included, as FlopCounterMode counts them; and those that touch the image
# only, as XLA's cost analysis counts them), the elements of its input, weights and output, and its
# convolution groups (1: a dense convolution or a linear layer).
Layer = namedtuple("Layer", "kind macs image_macs inputs weights outputs groups")

ModelFlops = namedtuple("ModelFlops", "forward backward training")
"""FLOPs for one image: the forward pass, the backward pass, and their sum (a training step's share)."""

FLOPS_PER_MAC = 2
COUNTED = "multiply-add = 2 FLOPs, backward = 2 x forward"  # the convention, as the tool says it


class _Shape(object):
    """Walks a model's layers for one image, keeping the current shape (channels, height, width)."""

    def __init__(self, image_size):
        # type: (int) -> None
        self.c, self.h, self.w = 3, image_size, image_size
        self.layers = []  # type: List[Layer]

    def conv(self, out, kernel, stride=1, pad=0, groups=1):
        # type: (int, int, int, int, int) -> None
        h, w = _out(self.h, kernel, stride, pad), _out(self.w, kernel, stride, pad)
        weights = out * (self.c // groups) * kernel * kernel
        taps = _taps(self.h, kernel, stride, pad) * _taps(self.w, kernel, stride, pad)
        inside = taps * out * (self.c // groups)
        inputs = self.c * self.h * self.w
        self.layers.append(Layer("conv", h * w * weights, inside, inputs, weights, out * h * w, groups))
        self.c, self.h, self.w = out, h, w

    def pool(self, kernel, stride, pad=0):
        # type: (int, int, int) -> None
        self.h, self.w = _out(self.h, kernel, stride, pad), _out(self.w, kernel, stride, pad)

    def adaptive(self, size):
        # type: (int) -> None
        self.h = self.w = size

    def linear(self, out):
        # type: (int) -> None
        inputs = self.c * self.h * self.w
        self.layers.append(Layer("linear", inputs * out, inputs * out, inputs, inputs * out, out, 1))
        self.c, self.h, self.w = out, 1, 1


def _out(size, kernel, stride, pad):
    # type: (int, int, int, int) -> int
    out = (size + 2 * pad - kernel) // stride + 1
    if out < 1:
        raise ValueError("the image is too small for this model: a {}-wide layer of kernel {}".format(size, kernel))
    return out


def _taps(size, kernel, stride, pad):
    # type: (int, int, int, int) -> int
    """Along one dimension: the kernel taps, over every output position, that fall inside the input."""
    return sum(
        sum(1 for j in range(kernel) if 0 <= o * stride - pad + j < size)
        for o in range(_out(size, kernel, stride, pad))
    )


def _classifier(s, num_classes):
    # type: (_Shape, int) -> None
    s.linear(4096)
    s.linear(4096)
    s.linear(num_classes)


def _alexnet(s, num_classes):
    # type: (_Shape, int) -> None
    s.conv(64, 11, 4, 2)
    s.pool(3, 2)
    s.conv(192, 5, 1, 2)
    s.pool(3, 2)
    s.conv(384, 3, 1, 1)
    s.conv(256, 3, 1, 1)
    s.conv(256, 3, 1, 1)
    s.pool(3, 2)
    s.adaptive(6)
    _classifier(s, num_classes)


VGG16_LAYERS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def _vgg16(s, num_classes):
    # type: (_Shape, int) -> None
    for layer in VGG16_LAYERS:
        if layer == "M":
            s.pool(2, 2)
        else:
            s.conv(int(layer), 3, 1, 1)
    s.adaptive(7)
    _classifier(s, num_classes)


def _resnet50(s, num_classes):
    # type: (_Shape, int) -> None
    s.conv(64, 7, 2, 3)
    s.pool(3, 2, 1)
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            first = stride if i == 0 else 1
            c, h, w = s.c, s.h, s.w
            s.conv(width, 1)
            s.conv(width, 3, first, 1)
            s.conv(width * 4, 1)
            if first != 1 or c != width * 4:  # the downsampling shortcut, from the block's input
                out = (s.c, s.h, s.w)
                s.c, s.h, s.w = c, h, w
                s.conv(width * 4, 1, first)
                s.c, s.h, s.w = out
    s.adaptive(1)
    s.linear(num_classes)


def _mobilenet_v2(s, num_classes):
    # type: (_Shape, int) -> None
    s.conv(32, 3, 2, 1)
    for expand, out, repeats, stride in MOBILENET_V2_SETTINGS:
        for i in range(repeats):
            hidden = int(round(s.c * expand))
            if expand != 1:
                s.conv(hidden, 1)
            s.conv(hidden, 3, stride if i == 0 else 1, 1, groups=hidden)
            s.conv(out, 1)
    s.conv(1280, 1)
    s.adaptive(1)
    s.linear(num_classes)


_BUILDERS = {"alexnet": _alexnet, "mobilenet_v2": _mobilenet_v2, "resnet50": _resnet50, "vgg16": _vgg16}
MODELS = tuple(sorted(_BUILDERS))


def layers(model, image_size=224, num_classes=3):
    # type: (str, int, int) -> List[Layer]
    """The counted layers of `model` for one image of `image_size` px (KeyError: not a built-in model)."""
    s = _Shape(image_size)
    _BUILDERS[model](s, num_classes)
    return s.layers


def model_flops(model, image_size=224, num_classes=3, padding=True):
    # type: (str, int, int, bool) -> ModelFlops
    """One image's forward, backward and training FLOPs, by the convention above; `padding=False` leaves
    out the multiply-adds with the zero padding (XLA's way: a few % at 224 px, more on small images)."""
    counted = layers(model, image_size, num_classes)
    macs = [layer.macs if padding else layer.image_macs for layer in counted]
    forward = FLOPS_PER_MAC * sum(macs)
    backward = 2 * forward - FLOPS_PER_MAC * macs[0]  # the first layer: its weights' gradient only
    return ModelFlops(forward, backward, forward + backward)
