"""Apache SINGA 3.x/4.x (`singa.device`, `tensor`, `opt.SGD`, `model.Model`, `layer`), written against
SINGA's documented Python API and its `examples/cnn` (model/alexnet.py, model/resnet.py, train_cnn.py).

Runs on PyPI's only build, `singa==3.0.0.dev1` (CPython 3.6, CPU), whose wheel defects
`singa_patches` mends on import (each only where found); `tracer env create singa` makes that
environment. SINGA 3.0 refuses MobileNetV2 on a CPU (grouped convolution is "Not implemented yet"):
the run fails with SINGA's message, marked as a refusal (`REFUSED`).

SINGA has no model zoo package, so the four models are defined with `singa.layer` to match torchvision
(including its adaptive average pooling, done with two constant matrices through `singa.autograd`).
It has no input-pipeline library either: its examples batch NumPy arrays in the training loop. So that
`--workers N` means N parallel decoders here as in every other framework, the worker decodes in a pool of
N processes (`tracer.worker.pool_loader`, Python's multiprocessing); `--workers 0` is the examples' way,
decoding in the training loop.
"""

import collections
import random
from typing import Any, Deque, Dict, Iterator, List, Tuple

import numpy as np
from singa import autograd, device, layer, model, opt, tensor

from tracer.worker import base
from tracer.worker.base import EpochStats, ParamCount
from tracer.worker.frameworks import singa_patches
from tracer.worker.pool_loader import START_METHOD, PoolLoader
from tracer.worker.workload import MOBILENET_V2_SETTINGS, adaptive_pool_matrix, normalise

WHEEL_MENDS = singa_patches.apply()  # before any tensor is made
REFUSED = "refused by SINGA"  # the start of a refusal's message, the rest being SINGA's own words


class AdaptiveAvgPool(layer.Layer):
    """torch.nn.AdaptiveAvgPool2d((n, n)) for NCHW input, as two matrix products (it is separable)."""

    def __init__(self, size: int) -> None:
        super(AdaptiveAvgPool, self).__init__()
        self.size = size
        self._mats = {}  # type: Dict[Tuple[int, int], Tuple[Any, Any]]

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
                % (REFUSED, _singa_version(), name, e)
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


def _singa_version() -> str:
    import singa

    return str(getattr(singa, "__version__", "unknown"))


class Trainer(base.Trainer):
    def versions(self) -> Dict[str, str]:
        return {"singa": _singa_version(), "numpy": np.__version__}

    def knobs(self) -> Dict[str, object]:
        workers = self._workers()
        return {
            "input pipeline": (
                "multiprocessing.Pool (%s) of decode processes building uint8 batches, normalised with NumPy in"
                " the training loop" % START_METHOD
                if workers
                else "NumPy batches decoded in the training loop (SINGA's examples/cnn)"
            ),
            "multiprocessing.Pool.processes": workers,
            "batches in flight": workers * self._prefetch(),
            "use_graph": False,
            "wheel defects mended (singa_patches)": ", ".join(WHEEL_MENDS) or "none",
        }

    def build(self) -> ParamCount:
        cfg = self.cfg
        rejected = (
            ("--threads", cfg.threads, "SINGA exposes no intra-op thread setting in its Python API"),
            ("--gpu-thread-mode", cfg.gpu_thread_mode, "it is a TensorFlow setting"),
        )
        for flag, value, why in rejected:
            if value is not None:
                raise ValueError("%s is not supported with SINGA: %s" % (flag, why))
        if cfg.amp:
            raise ValueError("--amp is not supported with SINGA: its float16 mode converts the whole model")
        if cfg.device == "gpu":
            self.dev = device.create_cuda_gpu_on(0)
        else:
            self.dev = device.get_default_device()
        self.dev.SetRandSeed(cfg.seed)
        np.random.seed(cfg.seed)
        random.seed(cfg.seed)
        self.rng = np.random.RandomState(cfg.seed)
        self.net = MODELS[cfg.model](cfg.num_classes)
        self.net.set_optimizer(opt.SGD(lr=cfg.lr, momentum=cfg.momentum))
        self.loader = PoolLoader(self._workers(), self._prefetch())
        return compile_model(cfg.model, self.net, cfg.batch, cfg.image_size, self.dev)

    def _jobs(self) -> Iterator[Tuple[List[str], int, List[bool]]]:
        """The epoch's batches as loader jobs: files in a fresh permutation, a flip drawn per image (the
        main process draws every random number, so the order and flips do not depend on --workers)."""
        cfg = self.cfg
        order = self.rng.permutation(len(self.images))
        for start in range(0, len(order), cfg.batch):
            idx = order[start : start + cfg.batch]
            flips = [bool(self.rng.rand() < 0.5) for _ in idx]
            self._labels.append(np.asarray([self.images.labels[i] for i in idx], dtype=np.int32))
            yield [self.images.files[i] for i in idx], cfg.image_size, flips

    def _batches(self, epoch: int) -> Any:
        self._labels: Deque[Any] = collections.deque()  # of the jobs handed out, in order
        for pixels in self.loader.batches(self._jobs()):
            x = np.ascontiguousarray(normalise(pixels).transpose(0, 3, 1, 2))  # NHWC uint8 -> NCHW float32
            yield x, self._labels.popleft()
        if epoch == self.cfg.epochs:
            self.loader.close()

    def train_epoch(self, epoch: int) -> EpochStats:
        self.net.train()
        batches, step = self.epoch_input(epoch, lambda: self._batches(epoch), self._train_step)
        return self.run_epoch(epoch, batches, step, _read)

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = "NumPy batches indexed from the in-memory array, copied into SINGA tensors (examples/cnn)"

    def memory_batches(self, epoch: int) -> Any:
        """The files pipeline's order (the same generator's permutation), indexed from RAM."""
        held = self.memory_set
        assert held is not None
        order = self.rng.permutation(len(held.labels))
        for start in range(0, len(order), self.cfg.batch):
            idx = order[start : start + self.cfg.batch]
            yield held.images[idx], held.labels[idx].astype(np.int32)

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """Flip and normalise with NumPy, as SINGA's examples do; the step copies the batch into tensors."""
        x, y = batch
        if self.flip_memory:
            x = x.copy()  # the held set stays as decoded
            flip = self.rng.rand(len(y)) < 0.5
            x[flip] = x[flip, :, ::-1, :]
        return np.ascontiguousarray(normalise(x).transpose(0, 3, 1, 2)), y

    def synthetic_batch(self, n: int) -> Tuple[Any, Any, Any]:
        size = self.cfg.image_size
        tx = tensor.Tensor((n, 3, size, size), self.dev, tensor.float32)
        tx.gaussian(0.0, 1.0)
        y = self.rng.randint(0, self.cfg.num_classes, n).astype(np.int32)
        ty = tensor.from_numpy(y)
        ty.to_device(self.dev)
        return tx, ty, y

    def synthetic_step(self, files_step: Any) -> Any:
        def step(batch: Tuple[Any, Any, Any]) -> Tuple[Any, int]:
            tx, ty, y = batch
            logits, loss = self.net(tx, ty)
            return (loss, logits, y), len(y)

        return step

    def _train_step(self, batch: Any) -> Tuple[Any, int]:
        x, y = batch
        tx = tensor.from_numpy(x)
        ty = tensor.from_numpy(y)
        tx.to_device(self.dev)
        ty.to_device(self.dev)
        logits, loss = self.net(tx, ty)
        return (loss, logits, y), len(y)


def _read(outputs: Tuple[Any, Any, Any]) -> Tuple[float, float]:
    """The loss and the logits to the host (the step's host-device synchronisation); correct
    predictions are counted there against the labels the batch came with."""
    loss, logits, y = outputs
    predicted = tensor.to_numpy(logits).argmax(axis=1)
    return float(tensor.to_numpy(loss).reshape(-1)[0]), float((predicted == y).sum())
