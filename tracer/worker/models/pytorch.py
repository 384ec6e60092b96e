"""PyTorch's models: torchvision's own, untrained (the reference every other framework is held to)."""

from typing import Any

import torchvision

from tracer.worker.models import ParamCount

MODELS = {
    "alexnet": torchvision.models.alexnet,
    "mobilenet_v2": torchvision.models.mobilenet_v2,
    "resnet50": torchvision.models.resnet50,
    "vgg16": torchvision.models.vgg16,
}


def build_model(name: str, num_classes: int) -> Any:
    return MODELS[name](weights=None, num_classes=num_classes)


def count_params(model: Any) -> ParamCount:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    return ParamCount(trainable, total)


def model_params(name: str, num_classes: int = 3, image_size: int = 224) -> ParamCount:
    """For the parity test: the counts of the model exactly as a run builds it."""
    return count_params(build_model(name, num_classes))
