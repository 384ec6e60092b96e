"""JAX: Flax (linen) models that mirror torchvision layer for layer, optax SGD, grain as the input pipeline.

Flax has no model zoo, so AlexNet, MobileNetV2, ResNet-50 and VGG16 are written here from torchvision's
definitions (channels last; torchvision's padding, pooling, BatchNorm placement, initialisers and adaptive
average pooling), so that the parameter counts match and do not depend on the image size.

JAX compiles the train step for each new batch shape. That compilation is done ahead of time, outside the
step, and reported as a `compile` event (Event.COMPILE) inside an NVTX range `compile`, so that
summaries can tell compilation from training.
"""

import contextlib
import itertools
import os
import random
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

# GPU memory on demand, as PyTorch's caching allocator takes it, unless the user's environment says
# otherwise: by default XLA reserves 75 % of the card when its GPU client starts, so NVML would see the
# reservation, not what the model needs. Read by jaxlib when the GPU client starts; set before any import.
PREALLOCATE_ENV = "XLA_PYTHON_CLIENT_PREALLOCATE"
PREALLOCATE_FROM = "environment" if PREALLOCATE_ENV in os.environ else "tracer default"
os.environ.setdefault(PREALLOCATE_ENV, "false")

# Importing JAX does not start XLA: its CPU client (and XLA_FLAGS) starts with the first array, in build().
import flax  # noqa: E402
import flax.linen as nn  # noqa: E402
import grain  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from absl import flags  # noqa: E402 - grain's flags (absl ships with grain)

from tracer.worker import base  # noqa: E402
from tracer.worker.base import EpochStats, ParamCount  # noqa: E402
from tracer.worker.schema import Event  # noqa: E402
from tracer.worker.workload import MEAN, MOBILENET_V2_SETTINGS, STD, adaptive_pool_matrix, load_pixels  # noqa: E402

# torchvision's initialisers, as variance-scaling initialisers.
KAIMING_FAN_OUT = nn.initializers.variance_scaling(2.0, "fan_out", "normal")  # kaiming_normal_(mode="fan_out")
TORCH_DEFAULT = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")  # kaiming_uniform_(a=sqrt(5))
LINEAR_SMALL = nn.initializers.normal(0.01)  # normal_(0, 0.01)

# Each loader process decodes whole batches in its own main thread (grain.ReadOptions in the process):
# no reader threads, so --workers N is N decoders, each free of the others' interpreter lock.
THREADS_PER_LOADER_PROCESS = 0
INPUT_DTYPE = "uint8 (decoded, resized, cropped, flipped in the loader; normalised on the device in the step)"


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


MODELS = {"alexnet": AlexNet, "mobilenet_v2": MobileNetV2, "resnet50": ResNet50, "vgg16": VGG16}  # type: Dict[str, Any]


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


class _Load:
    """grain map step: decode, resize + crop (workload.py), random flip from grain's per-element
    generator (seeded from --seed and reseeded each epoch, so runs repeat); uint8 pixels: a quarter of
    float32's bytes through shared memory and to the device, where the step normalises them."""

    def __init__(self, files: Any, labels: Any, size: int) -> None:
        self.files = files
        self.labels = labels
        self.size = size

    def __call__(self, index: int, rng: Any) -> Tuple[Any, Any]:
        flip = bool(rng.random() < 0.5)
        return load_pixels(self.files[index], self.size, flip), np.int32(self.labels[index])


def _normalise(x: Any) -> Any:
    """workload.normalise on the device, inside the compiled step: uint8 NHWC in, float32 out."""
    scaled = x.astype(jnp.float32) / 255.0
    return (scaled - jnp.asarray(MEAN, jnp.float32)) / jnp.asarray(STD, jnp.float32)


class Trainer(base.Trainer):
    def versions(self) -> Dict[str, str]:
        import jaxlib

        backend = jax.default_backend()
        return {
            "jax": jax.__version__,
            "jaxlib": jaxlib.__version__,
            "flax": flax.__version__,
            "optax": optax.__version__,
            "grain": str(getattr(grain, "__version__", "unknown")),
            "backend": backend,
            "cuda": str(_cuda_version()) if backend == "gpu" else "None",
            "numpy": np.__version__,
        }

    def _threads_flags(self) -> str:
        if not self.cfg.threads:
            return ""
        return "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=%d" % self.cfg.threads

    PEAK_MEMORY_SOURCE = "jax.Device.memory_stats()['peak_bytes_in_use']"

    def knobs(self) -> Dict[str, object]:
        cfg = self.cfg
        workers = self._workers()
        return {
            "grain.MultiprocessingOptions.num_workers": workers,
            "grain.MultiprocessingOptions.per_worker_buffer_size": self._prefetch() if workers else None,
            "grain.ReadOptions.num_threads": THREADS_PER_LOADER_PROCESS,
            "grain.ReadOptions.prefetch_buffer_size": 0,
            "input dtype": INPUT_DTYPE,
            "XLA_FLAGS": os.environ.get("XLA_FLAGS") or None,
            PREALLOCATE_ENV: os.environ.get(PREALLOCATE_ENV),
            PREALLOCATE_ENV + " from": PREALLOCATE_FROM,
            "compute_dtype": "bfloat16" if cfg.amp else "float32",
            "param_dtype": "float32",
        }

    def _check_knobs(self) -> None:
        cfg = self.cfg
        if cfg.gpu_thread_mode:
            raise ValueError("--gpu-thread-mode is a TensorFlow setting; JAX has no equivalent")
        for name, value, least in (
            ("--workers", cfg.workers, 0),
            ("--prefetch", cfg.prefetch, 1),
            ("--threads", cfg.threads, 1),
        ):
            if value is not None and value < least:
                raise ValueError("%s %d: grain and XLA need at least %d" % (name, value, least))

    def build(self) -> ParamCount:
        cfg = self.cfg
        self._check_knobs()
        flags = self._threads_flags()
        if flags:  # before XLA's CPU client starts
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        if cfg.device == "gpu":
            if jax.default_backend() != "gpu":
                raise RuntimeError(
                    "--device gpu, but JAX's backend is %s (install jax[cuda13])" % jax.default_backend()
                )
            self.device = jax.devices("gpu")[0]
        else:
            self.device = jax.devices("cpu")[0]
        # bfloat16 on CPU and GPU alike: it needs no loss scaling, which optax does not provide.
        dtype = jnp.bfloat16 if cfg.amp else jnp.float32
        self.model = MODELS[cfg.model](cfg.num_classes, dtype=dtype)
        shape = [1, cfg.image_size, cfg.image_size, 3]
        x = jax.device_put(np.zeros(shape, np.float32), self.device)
        key = jax.device_put(jax.random.PRNGKey(cfg.seed), self.device)
        with self._compiling("init", shape):
            init = jax.jit(lambda key, x: self.model.init({"params": key}, x, train=False)).lower(key, x).compile()
        variables = init(key, x)
        self.params = variables["params"]
        self.batch_stats = variables.get("batch_stats", {})
        self.tx = optax.sgd(cfg.lr, momentum=cfg.momentum)
        self.opt_state = self.tx.init(self.params)
        self.dropout_key = jax.random.PRNGKey(cfg.seed + 1)
        self._jitted = jax.jit(self._train_step, donate_argnums=(0, 1, 2))
        self._compiled = {}  # type: Dict[Tuple[int, ...], Any]
        self._batches = None  # type: Optional[Any]
        return count_params(variables)

    def _train_step(self, params: Any, batch_stats: Any, opt_state: Any, x: Any, y: Any, key: Any) -> Any:
        x = _normalise(x)

        def loss_fn(p: Any) -> Any:
            logits, updates = self.model.apply(
                {"params": p, "batch_stats": batch_stats}, x, train=True, rngs={"dropout": key}, mutable=["batch_stats"]
            )
            loss = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), y).mean()
            return loss, (updates, logits)

        (loss, (updates, logits)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        changes, opt_state = self.tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, changes)
        correct = (jnp.argmax(logits, axis=-1) == y).sum()
        return params, updates.get("batch_stats", batch_stats), opt_state, (loss, correct)

    def _step_for(self, x: Any, y: Any, key: Any) -> Any:
        """The compiled step for this batch shape; compiles it (timed, its own event) on first sight."""
        shape = tuple(x.shape)
        compiled = self._compiled.get(shape)
        if compiled is None:
            with self._compiling("train_step", list(shape)):
                lowered = self._jitted.lower(self.params, self.batch_stats, self.opt_state, x, y, key)
                compiled = lowered.compile()
            self._compiled[shape] = compiled
        return compiled

    @contextlib.contextmanager
    def _compiling(self, function: str, batch_shape: List[int]) -> Iterator[None]:
        """A `compile` event before and after (with its seconds) and an NVTX range `compile FUNCTION`."""
        self.reporter.emit(Event.COMPILE, state="start", function=function, batch_shape=batch_shape)
        start = time.perf_counter()
        with self.nvtx.range("compile " + function):
            yield
        seconds = time.perf_counter() - start
        self.reporter.emit(Event.COMPILE, state="end", function=function, batch_shape=batch_shape, seconds=seconds)

    def _pipeline(self) -> Any:
        """The whole run's batches, as JAX users feed grain: shuffle, map, batch, repeat for the epochs
        (reshuffled and reseeded each epoch), read by --workers processes (`mp_prefetch`), each building
        whole batches in its own interpreter and holding --prefetch of them ready; one iterator for the
        run, so the processes start once (in the first step) as PyTorch's persistent workers do."""
        cfg = self.cfg
        load = _Load(list(self.images.files), list(self.images.labels), cfg.image_size)
        dataset = (
            grain.MapDataset.range(len(self.images))
            .shuffle(seed=cfg.seed)
            .random_map(load, seed=cfg.seed)
            .batch(cfg.batch)
            .repeat(cfg.epochs)
        )
        reader = grain.ReadOptions(num_threads=THREADS_PER_LOADER_PROCESS, prefetch_buffer_size=0)
        batches = dataset.to_iter_dataset(reader)
        workers = self._workers()
        if workers:
            if not flags.FLAGS.is_parsed():  # grain reads an absl flag when it starts a process
                flags.FLAGS.mark_as_parsed()
            processes = grain.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=self._prefetch())
            batches = batches.mp_prefetch(processes)
        return iter(batches)

    def _epoch_batches(self, epoch: int) -> Iterator[Any]:
        """This epoch's share of the run's one iterator; closed after the last epoch (stops its processes)."""
        if self._batches is None:
            self._batches = self._pipeline()
        steps = -(-len(self.images) // self.cfg.batch)
        yield from itertools.islice(self._batches, steps)
        if epoch == self.cfg.epochs and hasattr(self._batches, "close"):
            self._batches.close()

    def _peak_memory_bytes(self) -> Optional[float]:
        stats = self.device.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
        return None if peak is None else float(peak)

    def train_epoch(self, epoch: int) -> EpochStats:
        steps = itertools.count()

        def dispatch(batch: Any) -> Tuple[Any, int]:
            """Copies the batch to the device and dispatches the compiled step (asynchronously: the
            loss is read by `run_epoch` every `--sync-every` steps)."""
            x_host, y_host = batch
            x = jax.device_put(x_host, self.device)
            y = jax.device_put(y_host, self.device)
            key = jax.random.fold_in(self.dropout_key, epoch * 1000003 + next(steps))
            compiled = self._step_for(x, y, key)
            self.params, self.batch_stats, self.opt_state, loss = compiled(
                self.params, self.batch_stats, self.opt_state, x, y, key
            )
            return loss, int(y_host.shape[0])

        batches, step = self.epoch_input(epoch, lambda: self._epoch_batches(epoch), dispatch)
        return self.run_epoch(epoch, batches, step, lambda out: (float(out[0]), float(out[1])))

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = "grain.MapDataset over the in-memory array: shuffle (the files pipeline's seed) + batch"

    def memory_batches(self, epoch: int) -> Any:
        """grain over an in-memory source, shuffled as the files pipeline is (one dataset for the run,
        shuffled with --seed and repeated for the epochs, so each epoch gets grain's next permutation),
        batched in the loop's thread; this epoch's share of it."""
        held = self.memory_set
        assert held is not None
        self._memory_steps = itertools.count()
        self._memory_epoch = epoch
        if getattr(self, "_memory_run", None) is None:
            dataset = (
                grain.MapDataset.source(_ArraySource(held.images, held.labels))
                .shuffle(seed=self.cfg.seed)
                .batch(self.cfg.batch)
                .repeat(self.cfg.epochs)
            )
            # grain's advice for data already in memory: no reader threads, no read-ahead buffer.
            self._memory_run = iter(dataset.to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)))
        return itertools.islice(self._memory_run, -(-len(held.labels) // self.cfg.batch))

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """uint8 NHWC to the device and a random flip there, in one compiled function (compiled ahead per
        batch shape, reported as a `compile` event like the train step); the step normalises, as for files."""
        x_host, y_host = batch
        x = jax.device_put(x_host, self.device)
        key = jax.random.fold_in(jax.random.fold_in(self._flip_key(), self._memory_epoch), next(self._memory_steps))
        shape = tuple(x.shape)
        compiled = self._prepare_compiled().get(shape)
        if compiled is None:
            with self._compiling("prepare", list(shape)):
                compiled = jax.jit(_prepare, static_argnums=(2,)).lower(x, key, self.flip_memory).compile()
            self._prepare_compiled()[shape] = compiled
        return compiled(x, key), jax.device_put(y_host, self.device)

    def _prepare_compiled(self) -> Dict[Tuple[int, ...], Any]:
        if getattr(self, "_prepares", None) is None:
            self._prepares = {}  # type: Dict[Tuple[int, ...], Any]
        return self._prepares

    def _flip_key(self) -> Any:
        if getattr(self, "_flips", None) is None:
            self._flips = jax.device_put(jax.random.PRNGKey(self.cfg.seed + 2), self.device)
        return self._flips

    def synthetic_batch(self, n: int) -> Tuple[Any, Any]:
        size = self.cfg.image_size
        kx, ky = jax.random.split(jax.random.PRNGKey(self.cfg.seed + 3))
        pixels = jax.random.randint(kx, (n, size, size, 3), 0, 256, jnp.int32).astype(jnp.uint8)  # as files feed it
        x = jax.device_put(pixels, self.device)
        y = jax.device_put(jax.random.randint(ky, (n,), 0, self.cfg.num_classes, jnp.int32), self.device)
        return x, y


class _ArraySource:
    """The decoded set as a grain random-access source: (HWC uint8 image, int32 label) per index."""

    def __init__(self, images: Any, labels: Any) -> None:
        self.images = images
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Tuple[Any, Any]:
        return self.images[index], np.int32(self.labels[index])


def _prepare(x: Any, key: Any, flip: bool) -> Any:
    """A random horizontal flip per image of a uint8 NHWC batch (the step normalises it, see _normalise)."""
    if flip:
        mask = jax.random.uniform(key, (x.shape[0],)) < 0.5
        x = jnp.where(mask[:, None, None, None], x[:, :, ::-1, :], x)
    return x


def _cuda_version() -> Any:
    try:
        return jax.devices("gpu")[0].client.platform_version
    except Exception:  # noqa: BLE001 - only for run.json
        return None
