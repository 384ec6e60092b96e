"""SINGA's models, defined with `singa.layer` to match torchvision: SINGA has no model zoo package
(including torchvision's adaptive average pooling, done with two constant matrices through
`singa.autograd`). SINGA 3.0 refuses MobileNetV2 on a CPU (grouped convolution is "Not implemented
yet"): the build fails with SINGA's message, marked as a refusal (`REFUSED`).

PyPI's only build (`singa==3.0.0.dev1`) is mended on import (`singa_patches`), before any tensor is made.
"""

from typing import Any, Dict, List, Tuple

import numpy as np
from singa import autograd, device, layer, model, opt, tensor

from tracer.worker.frameworks import singa_patches
from tracer.worker.models import ParamCount
from tracer.worker.workload import MOBILENET_V2_SETTINGS, adaptive_pool_matrix

WHEEL_MENDS = singa_patches.apply()  # before any tensor is made
REFUSED = "refused by SINGA"  # the start of a refusal's message, the rest being SINGA's own words


class AdaptiveAvgPool(layer.Layer):
    """torch.nn.AdaptiveAvgPool2d((n, n)) for NCHW input, as two matrix products (it is separable)."""

    def __init__(self, size: int) -> None:
        super(AdaptiveAvgPool, self).__init__()
        self.size = size
        self._mats: Dict[Tuple[int, int], Tuple[Any, Any]] = {}

    def _matrices(self, h: int, w: int, dev: Any) -> Tuple[Any, Any]:
        """Made with the device's graph buffer off: `Model.compile` runs the first forward with it on
        and then discards what it buffered, which would leave these constants all zeros."""
        if (h, w) not in self._mats:
            buffering = dev.graph_enabled()
            dev.EnableGraph(False)
            try:
                rows = tensor.from_numpy(adaptive_pool_matrix(h, self.size).T.copy())  # (H, n)
                cols = tensor.from_numpy(adaptive_pool_matrix(w, self.size).T.copy())  # (W, n)
                rows.to_device(dev)
                cols.to_device(dev)
            finally:
                dev.EnableGraph(buffering)
            self._mats[(h, w)] = (rows, cols)
        return self._mats[(h, w)]

    def forward(self, x: Any) -> Any:
        b, c, h, w = x.shape
        rows, cols = self._matrices(h, w, x.device)
        n = self.size
        y = autograd.matmul(autograd.reshape(x, (b * c * h, w)), cols)  # (B*C*H, n)
        y = autograd.transpose(autograd.reshape(y, (b, c, h, n)), (0, 1, 3, 2))  # (B, C, n, H)
        y = autograd.matmul(autograd.reshape(y, (b * c * n, h)), rows)  # (B*C*n, n)
        return autograd.transpose(autograd.reshape(y, (b, c, n, n)), (0, 1, 3, 2))


class ReLU6(layer.Layer):
    def forward(self, x: Any) -> Any:
        return autograd.clip(x, 0.0, 6.0)


class Sequential(layer.Layer):
    """Calls its layers in order; registers them so that SINGA finds their parameters."""

    def __init__(self, *layers: Any) -> None:
        super(Sequential, self).__init__()
        self.layers = list(layers)
        self.register_layers(*self.layers)

    def forward(self, x: Any) -> Any:
        for lay in self.layers:
            x = lay(x)
        return x


def _classifier(in_features: int, num_classes: int) -> Any:
    """torchvision's AlexNet/VGG head."""
    return Sequential(
        layer.Flatten(),
        layer.Dropout(0.5),
        layer.Linear(in_features, 4096),
        layer.ReLU(),
        layer.Dropout(0.5),
        layer.Linear(4096, 4096),
        layer.ReLU(),
        layer.Linear(4096, num_classes),
    )


class Classifier(model.Model):
    """features -> pool -> head, trained with SoftMaxCrossEntropy and the optimizer set on it."""

    def __init__(self, features: Any, pool: Any, head: Any) -> None:
        super(Classifier, self).__init__()
        self.features = features
        self.pool = pool
        self.head = head
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x: Any) -> Any:
        return self.head(self.pool(self.features(x)))

    def train_one_batch(self, x: Any, y: Any) -> Tuple[Any, Any]:
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss

    def set_optimizer(self, optimizer: Any) -> None:
        self.optimizer = optimizer


def alexnet(num_classes: int) -> Any:
    features = Sequential(
        layer.Conv2d(3, 64, 11, stride=4, padding=2),
        layer.ReLU(),
        layer.MaxPool2d(3, 2, padding=0),
        layer.Conv2d(64, 192, 5, padding=2),
        layer.ReLU(),
        layer.MaxPool2d(3, 2, padding=0),
        layer.Conv2d(192, 384, 3, padding=1),
        layer.ReLU(),
        layer.Conv2d(384, 256, 3, padding=1),
        layer.ReLU(),
        layer.Conv2d(256, 256, 3, padding=1),
        layer.ReLU(),
        layer.MaxPool2d(3, 2, padding=0),
    )
    return Classifier(features, AdaptiveAvgPool(6), _classifier(256 * 6 * 6, num_classes))


def vgg16(num_classes: int) -> Any:
    layers = []  # type: List[Any]
    channels = 3
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            layers.append(layer.MaxPool2d(2, 2, padding=0))
        else:
            layers += [layer.Conv2d(channels, int(v), 3, padding=1), layer.ReLU()]
            channels = int(v)
    return Classifier(Sequential(*layers), AdaptiveAvgPool(7), _classifier(512 * 7 * 7, num_classes))


class Bottleneck(layer.Layer):
    """torchvision's ResNet v1.5 bottleneck (stride on the 3x3 conv), as in SINGA's examples/cnn/model/resnet.py."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: Any = None) -> None:
        super(Bottleneck, self).__init__()
        self.conv1 = layer.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = layer.BatchNorm2d(planes)
        self.conv2 = layer.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d(planes)
        self.conv3 = layer.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = layer.BatchNorm2d(planes * 4)
        self.relu1 = layer.ReLU()
        self.relu2 = layer.ReLU()
        self.relu3 = layer.ReLU()
        self.add = layer.Add()
        self.downsample = downsample

    def forward(self, x: Any) -> Any:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        residual = self.downsample(x) if self.downsample is not None else x
        return self.relu3(self.add(out, residual))


def resnet50(num_classes: int) -> Any:
    layers = [
        layer.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        layer.BatchNorm2d(64),
        layer.ReLU(),
        layer.MaxPool2d(3, 2, padding=1),
    ]  # type: List[Any]
    inplanes = 64
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        downsample = None
        if stride != 1 or inplanes != planes * 4:
            downsample = Sequential(
                layer.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False), layer.BatchNorm2d(planes * 4)
            )
        layers.append(Bottleneck(inplanes, planes, stride, downsample))
        inplanes = planes * 4
        for _ in range(1, blocks):
            layers.append(Bottleneck(inplanes, planes))
    head = Sequential(layer.Flatten(), layer.Linear(2048, num_classes))
    return Classifier(Sequential(*layers), AdaptiveAvgPool(1), head)


def _conv_bn(inp: int, out: int, kernel: int, stride: int, group: int = 1, relu6: bool = True) -> List[Any]:
    lays = [
        layer.Conv2d(inp, out, kernel, stride=stride, padding=(kernel - 1) // 2, group=group, bias=False),
        layer.BatchNorm2d(out),
    ]
    return lays + [ReLU6()] if relu6 else lays


class InvertedResidual(layer.Layer):
    def __init__(self, inp: int, out: int, stride: int, expand: int) -> None:
        super(InvertedResidual, self).__init__()
        hidden = inp * expand
        lays = [] if expand == 1 else _conv_bn(inp, hidden, 1, 1)
        lays += _conv_bn(hidden, hidden, 3, stride, group=hidden)
        lays += _conv_bn(hidden, out, 1, 1, relu6=False)
        self.body = Sequential(*lays)
        self.residual = stride == 1 and inp == out
        self.add = layer.Add()

    def forward(self, x: Any) -> Any:
        y = self.body(x)
        return self.add(x, y) if self.residual else y


def mobilenet_v2(num_classes: int) -> Any:
    """torchvision.models.mobilenet_v2 (width 1.0)."""
    lays = _conv_bn(3, 32, 3, 2)
    inp = 32
    for t, c, n, s in MOBILENET_V2_SETTINGS:
        for i in range(n):
            lays.append(InvertedResidual(inp, c, s if i == 0 else 1, t))
            inp = c
    lays += _conv_bn(inp, 1280, 1, 1)
    head = Sequential(layer.Flatten(), layer.Dropout(0.2), layer.Linear(1280, num_classes))
    return Classifier(Sequential(*lays), AdaptiveAvgPool(1), head)


MODELS = {"alexnet": alexnet, "mobilenet_v2": mobilenet_v2, "resnet50": resnet50, "vgg16": vgg16}


def _size(t: Any) -> int:
    return int(np.prod(t.shape))


def compile_model(name: str, net: Any, batch: int, image_size: int, dev: Any) -> ParamCount:
    """SINGA creates parameters on the first forward: `compile` runs one, then they can be counted."""
    tx = tensor.Tensor((batch, 3, image_size, image_size), dev, tensor.float32)
    try:
        net.compile([tx], is_train=True, use_graph=False, sequential=False)
    except ValueError as e:
        if name == "mobilenet_v2" and dev.id() == -1:  # -1: SINGA's CPU device
            raise ValueError(
                "%s %s on a CPU (layer.Conv2d with group > 1, which %s's depthwise convolutions need): %s"
                % (REFUSED, singa_version(), name, e)
            ) from e
        raise
    trainable = sum(_size(t) for t in net.get_params().values())
    total = sum(_size(t) for t in net.get_states().values())
    return ParamCount(trainable, max(total, trainable))


def model_params(name: str, num_classes: int = 3, image_size: int = 224) -> ParamCount:
    """For the parity test: the counts of the model exactly as a run builds it."""
    net = MODELS[name](num_classes)
    net.set_optimizer(opt.SGD(lr=0.001, momentum=0.9))
    return compile_model(name, net, 1, image_size, device.get_default_device())


def singa_version() -> str:
    import singa

    return str(getattr(singa, "__version__", "unknown"))
