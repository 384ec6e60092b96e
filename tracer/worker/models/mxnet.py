"""MXNet's models: gluon.model_zoo.vision's, sized as torchvision's.

Gluon's AlexNet and VGG16 size their first Dense layer from the flattened feature map (9216 and 25088 at
224 px); an adaptive average pool to torchvision's 6x6 / 7x7 is inserted before it, as torchvision has,
so that the parameter count does not depend on the image size.
"""

from typing import Any

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon.model_zoo import vision

from tracer.worker.models import ParamCount

# Each model by its name in gluon.model_zoo.vision.
MODELS = {"alexnet": "alexnet", "mobilenet_v2": "mobilenetv2_1.0", "resnet50": "resnet50_v1", "vgg16": "vgg16"}
ADAPTIVE_POOL = {"alexnet": 6, "vgg16": 7}


class AdaptiveAvgPool(gluon.HybridBlock):
    def __init__(self, size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.size = size

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.size)


def build_model(name: str, num_classes: int) -> Any:
    net = vision.get_model(MODELS[name], classes=num_classes, pretrained=False)
    if name in ADAPTIVE_POOL:
        layers = list(net.features._children.values())
        features = gluon.nn.HybridSequential(prefix="")
        for layer in layers:
            first_flat = isinstance(layer, (gluon.nn.Flatten, gluon.nn.Dense))
            if first_flat and not any(isinstance(c, AdaptiveAvgPool) for c in features):
                features.add(AdaptiveAvgPool(ADAPTIVE_POOL[name]))
            features.add(layer)
        net.features = features
    return net


def initialise(net: Any, image_size: int, ctx: Any) -> ParamCount:
    """Initialises the (deferred-shape) parameters with one forward pass and counts them."""
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net(mx.nd.zeros((1, 3, image_size, image_size), ctx=ctx))
    trainable = total = 0
    for p in net.collect_params().values():
        n = int(np.prod(p.shape))
        total += n
        if p.grad_req != "null":
            trainable += n
    return ParamCount(trainable, total)


def model_params(name: str, num_classes: int = 3, image_size: int = 224) -> ParamCount:
    """For the parity test: the counts of the model exactly as a run builds it."""
    return initialise(build_model(name, num_classes), image_size, mx.cpu())
