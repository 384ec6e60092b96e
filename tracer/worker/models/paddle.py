"""PaddlePaddle's models: paddle.vision.models', sized as torchvision's.

paddle.vision's AlexNet flattens its last feature map straight into a 9216-wide Linear, which only fits
224 px input; an adaptive average pool to 6x6 is added before it, as torchvision has it.
"""

import functools
from typing import Any, Callable, Dict

import numpy as np
import paddle
from paddle.vision import models

from tracer.worker.models import ParamCount


class AlexNet(models.AlexNet):
    """paddle.vision.models.AlexNet with torchvision's AdaptiveAvgPool2d((6, 6)) before the classifier."""

    def __init__(self, num_classes: int) -> None:
        super().__init__(num_classes=num_classes)
        self._pool6 = paddle.nn.AdaptiveAvgPool2D((6, 6))

    def forward(self, inputs: Any) -> Any:
        x = self._conv1(inputs)
        x = self._conv2(x)
        x = paddle.nn.functional.relu(self._conv3(x))
        x = paddle.nn.functional.relu(self._conv4(x))
        x = self._pool6(self._conv5(x))
        x = paddle.flatten(x, start_axis=1, stop_axis=-1)
        x = paddle.nn.functional.relu(self._fc6(self._drop1(x)))
        x = paddle.nn.functional.relu(self._fc7(self._drop2(x)))
        return self._fc8(x)


# Each model as a function of its number of classes.
MODELS: Dict[str, Callable[..., Any]] = {
    "alexnet": AlexNet,
    "mobilenet_v2": functools.partial(models.mobilenet_v2, pretrained=False),
    "resnet50": functools.partial(models.resnet50, pretrained=False),
    "vgg16": functools.partial(models.vgg16, pretrained=False),
}


def build_model(name: str, num_classes: int) -> Any:
    return MODELS[name](num_classes=num_classes)


def count_params(model: Any) -> ParamCount:
    params = list(model.parameters())
    trainable = sum(int(np.prod(p.shape)) for p in params if not p.stop_gradient)
    total = sum(int(np.prod(p.shape)) for p in params) + sum(int(np.prod(b.shape)) for b in model.buffers())
    return ParamCount(trainable, total)


def model_params(name: str, num_classes: int = 3, image_size: int = 224) -> ParamCount:
    """For the parity test: the counts of the model exactly as a run builds it (size-independent)."""
    return count_params(build_model(name, num_classes))
