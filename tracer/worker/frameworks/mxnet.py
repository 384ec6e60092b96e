"""MXNet 1.9 Gluon: gluon.model_zoo.vision models, gluon.data.DataLoader as the input pipeline.

Gluon's AlexNet and VGG16 size their first Dense layer from the flattened feature map (9216 and 25088 at
224 px); an adaptive average pool to torchvision's 6x6 / 7x7 is inserted before it, as torchvision has,
so that the parameter count does not depend on the image size.
"""

import ctypes
import random
from typing import Any, Dict, Tuple

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon.data.vision import transforms
from mxnet.gluon.model_zoo import vision

from tracer.worker import base
from tracer.worker.base import EpochStats, ParamCount
from tracer.worker.workload import MEAN, STD, ImageList, load_normalised

ZOO_NAMES = {"alexnet": "alexnet", "mobilenet_v2": "mobilenetv2_1.0", "resnet50": "resnet50_v1", "vgg16": "vgg16"}
ADAPTIVE_POOL = {"alexnet": 6, "vgg16": 7}


class AdaptiveAvgPool(gluon.HybridBlock):
    def __init__(self, size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.size = size

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.size)


def build_model(name: str, num_classes: int) -> Any:
    net = vision.get_model(ZOO_NAMES[name], classes=num_classes, pretrained=False)
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


class ImageDataset(gluon.data.Dataset):
    """Decodes with the shared PIL+NumPy preprocessing; the flip is drawn per item from Python's RNG."""

    def __init__(self, images: ImageList, size: int) -> None:
        self.files = list(images.files)
        self.labels = list(images.labels)
        self.size = size

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        flip = random.random() < 0.5
        return load_normalised(self.files[index], self.size, flip), self.labels[index]


def native_transform(size: int, flip: bool = True) -> Any:
    """gluon.data.vision.transforms as MXNet users write them (OpenCV under mx.image)."""
    steps = [transforms.Resize(size, keep_ratio=True), transforms.CenterCrop(size)]
    if flip:
        steps.append(transforms.RandomFlipLeftRight())
    return transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


class NativeImageDataset(gluon.data.Dataset):
    """mx.image.imread (OpenCV decode, RGB) then gluon's vision transforms."""

    def __init__(self, images: ImageList, size: int) -> None:
        self.files = list(images.files)
        self.labels = list(images.labels)
        self.transform = native_transform(size)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        return self.transform(mx.image.imread(self.files[index])), self.labels[index]


def native_resize(size: int) -> Any:
    """The native pipeline's decode-side steps (no flip, no tensor): what --data memory keeps as uint8."""
    return transforms.Compose([transforms.Resize(size, keep_ratio=True), transforms.CenterCrop(size)])


def native_pixels(path: str, size: int) -> Any:
    """One image through the native pipeline without flip, as a CHW float32 array (pixel-agreement test)."""
    return native_transform(size, flip=False)(mx.image.imread(path)).asnumpy()


def _native_batchify(samples: Any) -> Tuple[Any, Any]:
    x = mx.nd.stack(*[s[0] for s in samples])
    return x, mx.nd.array([s[1] for s in samples], dtype="float32")


def _batchify(samples: Any) -> Tuple[Any, Any]:
    x = np.stack([s[0] for s in samples])
    y = np.asarray([s[1] for s in samples], dtype=np.float32)
    return mx.nd.array(x, dtype="float32"), mx.nd.array(y, dtype="float32")


class Trainer(base.Trainer):
    NATIVE_DECODER = "mx.image.imread (OpenCV imdecode)"
    NATIVE_RESIZE = "gluon transforms.Resize keep_ratio (OpenCV INTER_LINEAR, no antialias), shorter side, CenterCrop"

    def versions(self) -> Dict[str, str]:
        features = mx.runtime.Features()
        return {
            "mxnet": mx.__version__,
            "cuda": str(features.is_enabled("CUDA")),
            "cudnn": str(features.is_enabled("CUDNN")),
            "mkldnn": str(features.is_enabled("MKLDNN")),
            "numpy": np.__version__,
        }

    def knobs(self) -> Dict[str, object]:
        cfg = self.cfg
        return {
            "gluon.data.DataLoader.num_workers": self._workers(),
            "gluon.data.DataLoader.prefetch": self._prefetch() * self._workers(),
            "MXSetNumOMPThreads": cfg.threads,
            "mxnet.contrib.amp.target_dtype": self._amp_dtype(),
            "hybridize": True,
        }

    def build(self) -> ParamCount:
        cfg = self.cfg
        if cfg.gpu_thread_mode:
            raise ValueError("--gpu-thread-mode is a TensorFlow setting; MXNet has no equivalent")
        if cfg.threads:
            if mx.base._LIB.MXSetNumOMPThreads(ctypes.c_int(cfg.threads)) != 0:
                raise RuntimeError(
                    "MXSetNumOMPThreads(%d) failed: %s" % (cfg.threads, mx.base.py_str(mx.base._LIB.MXGetLastError()))
                )
        mx.random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        random.seed(cfg.seed)
        if cfg.device == "gpu":
            if mx.context.num_gpus() == 0:
                raise RuntimeError("--device gpu, but mxnet.context.num_gpus() is 0")
            self.ctx = mx.gpu(0)
        else:
            self.ctx = mx.cpu()
        if cfg.amp:
            from mxnet.contrib import amp

            amp.init(target_dtype=self._amp_dtype())
        self.net = build_model(cfg.model, cfg.num_classes)
        params = initialise(self.net, cfg.image_size, self.ctx)
        self.net.hybridize()
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.trainer = gluon.Trainer(
            self.net.collect_params(), "sgd", {"learning_rate": cfg.lr, "momentum": cfg.momentum}
        )
        if cfg.amp:
            from mxnet.contrib import amp

            amp.init_trainer(self.trainer)
        native = self._pipeline_kind() == "native"
        self.loader = gluon.data.DataLoader(
            NativeImageDataset(self.images, cfg.image_size) if native else ImageDataset(self.images, cfg.image_size),
            batch_size=cfg.batch,
            shuffle=True,
            last_batch="keep",
            batchify_fn=_native_batchify if native else _batchify,
            num_workers=self._workers(),
            prefetch=self._prefetch() * self._workers() or None,
            pin_memory=cfg.device == "gpu",
        )
        return params

    def train_epoch(self, epoch: int) -> EpochStats:
        batches, step = self.epoch_input(epoch, lambda: self.loader, self._train_step)
        return self.run_epoch(epoch, batches, step, _read)

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = "gluon.data.ArrayDataset + DataLoader(num_workers=0, shuffle)"
    DECODE_THREADS = 1  # MXNet's imperative NDArray calls are not safe from several Python threads

    def decode_uint8(self, path: str, size: int) -> Any:
        if self._pipeline_kind() != "native":
            return base.Trainer.decode_uint8(self, path, size)
        return native_resize(size)(mx.image.imread(path)).asnumpy().astype(np.uint8)

    def memory_batches(self, epoch: int) -> Any:
        if getattr(self, "_memory_loader", None) is None:
            held = self.memory_set
            assert held is not None
            self._memory_loader = gluon.data.DataLoader(
                gluon.data.ArrayDataset(held.images, held.labels),
                batch_size=self.cfg.batch,
                shuffle=True,
                last_batch="keep",
                num_workers=0,
                pin_memory=self.cfg.device == "gpu",
            )
            self._mean = mx.nd.array(MEAN, ctx=self.ctx).reshape((1, 3, 1, 1))
            self._std = mx.nd.array(STD, ctx=self.ctx).reshape((1, 3, 1, 1))
        return self._memory_loader

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """uint8 NHWC to the device, then ToTensor's and Normalize's arithmetic and a random flip there."""
        x, y = batch
        x = x.as_in_context(self.ctx).transpose((0, 3, 1, 2)).astype("float32") / 255
        if self.flip_memory:
            flip = mx.nd.random.uniform(shape=(x.shape[0],), ctx=self.ctx) < 0.5
            x = mx.nd.where(flip, mx.nd.flip(x, axis=3), x)
        x = mx.nd.broadcast_div(mx.nd.broadcast_sub(x, self._mean), self._std)
        return x, y.as_in_context(self.ctx).astype("float32")

    def synthetic_batch(self, n: int) -> Tuple[Any, Any]:
        size = self.cfg.image_size
        x = mx.nd.random.normal(shape=(n, 3, size, size), ctx=self.ctx)
        y = mx.nd.random.randint(0, self.cfg.num_classes, shape=(n,), ctx=self.ctx).astype("float32")
        return x, y

    def _train_step(self, batch: Any) -> Tuple[Any, int]:
        x, y = batch
        x = x.as_in_context(self.ctx)
        y = y.as_in_context(self.ctx)
        with autograd.record():
            logits = self.net(x)
            loss = self.loss_fn(logits, y)
            if self.cfg.amp:
                from mxnet.contrib import amp

                with amp.scale_loss(loss, self.trainer) as scaled:
                    autograd.backward(scaled)
        if not self.cfg.amp:
            loss.backward()
        n = int(x.shape[0])
        self.trainer.step(n)
        return (loss, logits, y), n

    def _finish_epoch(self) -> None:
        mx.nd.waitall()


def _read(outputs: Tuple[Any, Any, Any]) -> Tuple[float, float]:
    """The batch's mean loss and its correct predictions (argmax of the logits the step computed)."""
    loss, logits, y = outputs
    correct = (logits.argmax(axis=1) == y.astype(logits.dtype)).sum()
    return float(loss.mean().asscalar()), float(correct.asscalar())
