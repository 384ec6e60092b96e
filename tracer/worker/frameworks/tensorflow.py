"""TensorFlow 2 / Keras: keras.applications models, tf.data (parallel map + prefetch) as the input pipeline.

Keras has no AlexNet, and its VGG16 head is sized for 224 px (Flatten of 7x7x512); both are defined here
to match torchvision, including torchvision's adaptive average pooling, so that the parameter count does
not depend on the image size.
"""

import os
import random
from typing import Any, Dict, Optional, Tuple

# GPU memory on demand (TensorFlow's "memory growth"), as PyTorch's caching allocator takes it, unless the
# user's environment says otherwise: by default TensorFlow reserves nearly the whole card when it creates
# the GPU device, so NVML would see the reservation, not what the model needs. TensorFlow reads this
# variable when it creates the device; set before the import, and applied with set_memory_growth in build().
GROWTH_ENV = "TF_FORCE_GPU_ALLOW_GROWTH"
GROWTH_FROM = "environment" if GROWTH_ENV in os.environ else "tracer default"
os.environ.setdefault(GROWTH_ENV, "true")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tracer.worker import base  # noqa: E402
from tracer.worker.base import EpochStats, ParamCount  # noqa: E402
from tracer.worker.workload import MEAN, STD, adaptive_pool_matrix, load_normalised  # noqa: E402

keras = tf.keras

GPU_THREAD_MODES = ("global", "gpu_private", "gpu_shared")


class AdaptiveAveragePooling2D(keras.layers.Layer):
    """torch.nn.AdaptiveAvgPool2d for channels-last input: separable, so two constant matrices suffice."""

    def __init__(self, output_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_size = output_size

    def build(self, input_shape: Any) -> None:
        self._rows = tf.constant(adaptive_pool_matrix(int(input_shape[1]), self.output_size))
        self._cols = tf.constant(adaptive_pool_matrix(int(input_shape[2]), self.output_size))

    def call(self, x: Any) -> Any:
        rows = tf.cast(self._rows, x.dtype)
        cols = tf.cast(self._cols, x.dtype)
        return tf.einsum("oh,bhwc,pw->bopc", rows, x, cols)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return (input_shape[0], self.output_size, self.output_size, input_shape[3])


def _classifier(x: Any, num_classes: int, width: int, name: str) -> Any:
    """torchvision's AlexNet/VGG head: Dropout, Linear, ReLU, Dropout, Linear, ReLU, Linear."""
    layers = keras.layers
    x = layers.Flatten(name=name + "_flatten")(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dense(width, activation="relu", name=name + "_fc1")(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dense(width, activation="relu", name=name + "_fc2")(x)
    return layers.Dense(num_classes, name=name + "_predictions", dtype="float32")(x)


def alexnet(image_size: int, num_classes: int) -> Any:
    """torchvision.models.alexnet in Keras (channels last)."""
    layers = keras.layers
    inputs = keras.Input((image_size, image_size, 3))
    x = layers.ZeroPadding2D(2)(inputs)
    x = layers.Conv2D(64, 11, strides=4, activation="relu")(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = layers.Conv2D(192, 5, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = layers.Conv2D(384, 3, padding="same", activation="relu")(x)
    x = layers.Conv2D(256, 3, padding="same", activation="relu")(x)
    x = layers.Conv2D(256, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = AdaptiveAveragePooling2D(6)(x)
    return keras.Model(inputs, _classifier(x, num_classes, 4096, "alexnet"), name="alexnet")


def vgg16(image_size: int, num_classes: int) -> Any:
    """keras.applications.VGG16's convolutional base with torchvision's head (adaptive pool to 7x7)."""
    conv = keras.applications.VGG16(include_top=False, weights=None, input_shape=(image_size, image_size, 3))
    x = AdaptiveAveragePooling2D(7)(conv.output)
    return keras.Model(conv.input, _classifier(x, num_classes, 4096, "vgg16"), name="vgg16")


def mobilenet_v2(image_size: int, num_classes: int) -> Any:
    return keras.applications.MobileNetV2(
        input_shape=(image_size, image_size, 3), weights=None, classes=num_classes, classifier_activation=None
    )


def resnet50(image_size: int, num_classes: int) -> Any:
    return keras.applications.ResNet50(
        input_shape=(image_size, image_size, 3), weights=None, classes=num_classes, classifier_activation=None
    )


MODELS = {"alexnet": alexnet, "mobilenet_v2": mobilenet_v2, "resnet50": resnet50, "vgg16": vgg16}


def count_params(model: Any) -> ParamCount:
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    total = trainable + sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    return ParamCount(trainable, total)


def model_params(name: str, num_classes: int = 3, image_size: int = 224) -> ParamCount:
    """For the parity test: the counts of the model exactly as a run builds it."""
    return count_params(MODELS[name](image_size, num_classes))


def native_image(path: Any, size: int) -> Any:
    """The native pipeline's graph ops for one file, as TensorFlow users write them: read, decode_jpeg,
    resize the shorter side to `size` (bilinear, antialiased; the longer side truncated as torchvision
    does), central crop, scale to [0, 1], normalise. HWC float32."""
    return (native_resized(path, size) / 255.0 - tf.constant(MEAN, tf.float32)) / tf.constant(STD, tf.float32)


def native_resized(path: Any, size: int) -> Any:
    """`native_image` before its scaling: decoded, resized and cropped, HWC float32 in 0..255."""
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    shape = tf.shape(image)
    h, w = shape[0], shape[1]
    short = tf.minimum(h, w)
    nh = tf.where(h <= w, size, (size * h) // short)
    nw = tf.where(h <= w, (size * w) // short, size)
    image = tf.image.resize(image, tf.stack([nh, nw]), method="bilinear", antialias=True)
    top = tf.cast(tf.round(tf.cast(nh - size, tf.float32) / 2.0), tf.int32)
    left = tf.cast(tf.round(tf.cast(nw - size, tf.float32) / 2.0), tf.int32)
    return tf.image.crop_to_bounding_box(image, top, left, size, size)


def native_pixels(path: str, size: int) -> Any:
    """One image through the native pipeline without flip, as a CHW float32 array (pixel-agreement test)."""
    return native_image(tf.constant(path), size).numpy().transpose(2, 0, 1)


def memory_growth() -> bool:
    """On-demand GPU memory, as TF_FORCE_GPU_ALLOW_GROWTH says (TensorFlow takes "true" and "false")."""
    return os.environ.get(GROWTH_ENV, "").strip().lower() == "true"


class Trainer(base.Trainer):
    NATIVE_DECODER = "tf.io.read_file + tf.io.decode_jpeg"
    NATIVE_RESIZE = "tf.image.resize bilinear antialias, shorter side, central crop"
    PEAK_MEMORY_SOURCE = "tf.config.experimental.get_memory_info('GPU:0')['peak']"

    def versions(self) -> Dict[str, str]:
        build = tf.sysconfig.get_build_info()
        return {
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "cuda": str(build.get("cuda_version")),
            "cudnn": str(build.get("cudnn_version")),
            "numpy": np.__version__,
        }

    def knobs(self) -> Dict[str, object]:
        return {
            "tf.data.map.num_parallel_calls": self._parallel_calls()[1],
            "tf.data.prefetch.buffer_size": self._prefetch_buffer()[1],
            "tf.config.threading.intra_op_parallelism_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "keras.mixed_precision.global_policy": keras.mixed_precision.global_policy().name,
            "TF_GPU_THREAD_MODE": os.environ.get("TF_GPU_THREAD_MODE"),
            GROWTH_ENV: os.environ.get(GROWTH_ENV),
            GROWTH_ENV + " from": GROWTH_FROM,
            "tf.config.experimental.set_memory_growth": memory_growth() if self.cfg.device == "gpu" else None,
        }

    def _check_knobs(self) -> None:
        cfg = self.cfg
        if cfg.gpu_thread_mode is not None:
            if cfg.gpu_thread_mode not in GPU_THREAD_MODES:
                raise ValueError(
                    "--gpu-thread-mode %s: TensorFlow accepts %s" % (cfg.gpu_thread_mode, ", ".join(GPU_THREAD_MODES))
                )
            if cfg.device != "gpu":
                raise ValueError("--gpu-thread-mode sets TF_GPU_THREAD_MODE, which only matters with --device gpu")
        if cfg.threads is not None and cfg.threads < 1:
            raise ValueError("--threads %d: TensorFlow's thread pools need at least 1" % cfg.threads)
        self._prefetch_buffer()

    def _parallel_calls(self) -> Tuple[Any, object]:
        """tf.data map parallelism for the loader budget: N workers = N parallel calls; 0 = a sequential map
        run by the training loop's own request; autotune = tf.data.AUTOTUNE (only when asked for)."""
        workers = self._loader_workers()
        if workers == base.AUTOTUNE:
            return tf.data.AUTOTUNE, "AUTOTUNE"
        return (int(workers) or None), int(workers)

    def _prefetch_buffer(self) -> Tuple[Any, object]:
        """Batches prefetched: the per-worker depth times the workers (as torch's DataLoader holds them)."""
        workers = self._loader_workers()
        if workers == base.AUTOTUNE:
            if self.cfg.prefetch is None:
                return tf.data.AUTOTUNE, "AUTOTUNE"
            return self.cfg.prefetch, self.cfg.prefetch
        depth = self._prefetch() * int(workers)
        return depth, depth

    def build(self) -> ParamCount:
        cfg = self.cfg
        self._check_knobs()
        if cfg.gpu_thread_mode:
            os.environ["TF_GPU_THREAD_MODE"] = cfg.gpu_thread_mode  # read when the GPU device is created
        if cfg.threads:
            tf.config.threading.set_intra_op_parallelism_threads(cfg.threads)
        gpus = tf.config.list_physical_devices("GPU")
        if cfg.device == "gpu":
            for gpu in gpus:  # before the devices are created, i.e. before any tensor
                tf.config.experimental.set_memory_growth(gpu, memory_growth())
        keras.utils.set_random_seed(cfg.seed)
        random.seed(cfg.seed)
        if cfg.device == "gpu":
            if not gpus:
                raise RuntimeError("--device gpu, but tf.config.list_physical_devices('GPU') is empty")
            self.device = "/GPU:0"
        else:
            if gpus:
                tf.config.set_visible_devices([], "GPU")
            self.device = "/CPU:0"
        if cfg.amp:
            keras.mixed_precision.set_global_policy("mixed_float16" if cfg.device == "gpu" else "mixed_bfloat16")
        with tf.device(self.device):
            self.model = MODELS[cfg.model](cfg.image_size, cfg.num_classes)
            optimizer = keras.optimizers.SGD(learning_rate=cfg.lr, momentum=cfg.momentum)
            if cfg.amp and cfg.device == "gpu":
                optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.dataset = self._pipeline()
        self._step = tf.function(self._train_step, reduce_retracing=True)
        return count_params(self.model)

    def _pipeline(self) -> Any:
        """Shuffled (path or index, label) pairs mapped to images, batched, prefetched by the loader budget."""
        cfg = self.cfg
        labels = np.asarray(self.images.labels, dtype=np.int64)
        size = cfg.image_size
        if self._pipeline_kind() == "native":
            files = tf.constant(list(self.images.files))

            def decode(path: Any, label: Any) -> Any:
                return tf.image.random_flip_left_right(native_image(path, size), seed=cfg.seed), label

            dataset = tf.data.Dataset.from_tensor_slices((files, labels))
        else:
            decode = self._shared_decode()
            indices = np.arange(len(self.images), dtype=np.int64)
            dataset = tf.data.Dataset.from_tensor_slices((indices, labels))
        dataset = dataset.shuffle(len(self.images), seed=cfg.seed, reshuffle_each_iteration=True)
        parallel = self._parallel_calls()[0]
        if parallel is None:
            dataset = dataset.map(decode)
        else:
            dataset = dataset.map(decode, num_parallel_calls=parallel, deterministic=True)
        dataset = dataset.batch(cfg.batch)
        prefetch = self._prefetch_buffer()[0]
        return dataset.prefetch(prefetch) if prefetch else dataset

    def _shared_decode(self) -> Any:
        """--pipeline shared: the PIL+NumPy loader in a Python callback (identical pixels, holds the GIL)."""
        files = list(self.images.files)
        size = self.cfg.image_size
        seed = self.cfg.seed

        def load(index: Any) -> Any:
            return load_normalised(files[int(index)], size, flip=False, channels_first=False)

        def decode(index: Any, label: Any) -> Any:
            image = tf.numpy_function(load, [index], tf.float32, stateful=False)
            image.set_shape((size, size, 3))
            return tf.image.random_flip_left_right(image, seed=seed), label

        return decode

    def _train_step(self, x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = tf.cast(self.model(x, training=True), tf.float32)
            loss = self.loss_fn(y, logits)
            scaled = self.optimizer.scale_loss(loss) if hasattr(self.optimizer, "scale_loss") else loss
        grads = tape.gradient(scaled, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        hits = tf.equal(tf.argmax(logits, axis=1, output_type=y.dtype), y)
        return loss, tf.reduce_sum(tf.cast(hits, tf.float32))

    def train_epoch(self, epoch: int) -> EpochStats:
        with tf.device(self.device):
            batches, step = self.epoch_input(epoch, lambda: self.dataset, self._dispatch)
            return self.run_epoch(epoch, batches, step, lambda out: (float(out[0]), float(out[1])))

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = (
        "tf.data.Dataset.from_tensor_slices over (index, label) + shuffle (the files pipeline's seed) + batch,"
        " tf.gather from the set as one tensor"
    )

    def decode_uint8(self, path: str, size: int) -> Any:
        """The files pipeline's decode and resize; its float result rounded to uint8 (within half a level)."""
        if self._pipeline_kind() != "native":
            return base.Trainer.decode_uint8(self, path, size)
        resized = native_resized(tf.constant(path), size)
        return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8).numpy()

    def memory_batches(self, epoch: int) -> Any:
        """Shuffled, batched indices from tf.data, gathered from the set held as one tensor. The set is
        handed over by DLPack (no copy); tf.data would copy it twice (a graph constant, and a shuffle
        buffer of every image), as would tf.convert_to_tensor."""
        held = self.memory_set
        assert held is not None
        if getattr(self, "_memory_dataset", None) is None:
            self._memory_images = tf.experimental.dlpack.from_dlpack(held.images.__dlpack__())
            indices = np.arange(len(held.labels), dtype=np.int64)
            dataset = tf.data.Dataset.from_tensor_slices((indices, held.labels))
            dataset = dataset.shuffle(len(held.labels), seed=self.cfg.seed, reshuffle_each_iteration=True)
            self._memory_dataset = dataset.batch(self.cfg.batch)
        for index, label in self._memory_dataset:
            yield tf.gather(self._memory_images, index), label

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """uint8 NHWC to the device, then the files pipeline's scaling, a random flip and normalisation."""
        x, y = batch
        with tf.device(self.device):
            x = tf.cast(tf.identity(x), tf.float32) / 255.0
            if self.flip_memory:
                flip = tf.random.uniform([tf.shape(x)[0]]) < 0.5
                x = tf.where(flip[:, None, None, None], tf.reverse(x, axis=[2]), x)
            x = (x - tf.constant(MEAN, tf.float32)) / tf.constant(STD, tf.float32)
            return x, tf.identity(y)

    def synthetic_batch(self, n: int) -> Tuple[Any, Any]:
        size = self.cfg.image_size
        with tf.device(self.device):
            x = tf.random.normal([n, size, size, 3])
            return x, tf.random.uniform([n], 0, self.cfg.num_classes, dtype=tf.int64)

    def _peak_memory_bytes(self) -> Optional[float]:
        return float(tf.config.experimental.get_memory_info("GPU:0")["peak"])

    def _dispatch(self, batch: Any) -> Tuple[Any, int]:
        x, y = batch
        return self._step(x, y), int(y.shape[0])
