"""TensorFlow 2 / Keras: keras.applications models (tracer/worker/models/tensorflow.py), tf.data
(parallel map + prefetch) as the input pipeline."""

import os
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
from tracer.worker.memory_data import MemorySet  # noqa: E402
from tracer.worker.models.tensorflow import MODELS, count_params  # noqa: E402
from tracer.worker.reporting import Reporter  # noqa: E402
from tracer.worker.workload import MEAN, STD, ImageList, WorkloadConfig, load_normalised  # noqa: E402

keras = tf.keras

GPU_THREAD_MODES = ("global", "gpu_private", "gpu_shared")


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
    GPU_THREAD_MODES = GPU_THREAD_MODES

    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        base.Trainer.__init__(self, cfg, images, reporter)
        self._memory_images: Any = None  # --data memory: the set as one tensor (DLPack, no copy)
        self._memory_dataset: Any = None

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

    def check_knobs(self) -> None:
        base.Trainer.check_knobs(self)
        cfg = self.cfg
        if cfg.gpu_thread_mode is not None:
            if cfg.gpu_thread_mode not in GPU_THREAD_MODES:
                raise ValueError(
                    "--gpu-thread-mode %s: TensorFlow accepts %s" % (cfg.gpu_thread_mode, ", ".join(GPU_THREAD_MODES))
                )
            if cfg.device != "gpu":
                raise ValueError("--gpu-thread-mode sets TF_GPU_THREAD_MODE, which only matters with --device gpu")
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

    def set_threads(self, threads: int) -> None:
        tf.config.threading.set_intra_op_parallelism_threads(threads)

    def gpu_missing(self) -> str:
        if tf.config.list_physical_devices("GPU"):
            return ""
        return "tf.config.list_physical_devices('GPU') is empty"

    def use_device(self, gpu: bool) -> None:
        """Before TensorFlow creates its devices, i.e. before any tensor: the GPU thread mode and memory
        growth on a GPU; on a CPU, the GPUs hidden."""
        gpus = tf.config.list_physical_devices("GPU")
        if gpu:
            if self.cfg.gpu_thread_mode:
                os.environ["TF_GPU_THREAD_MODE"] = self.cfg.gpu_thread_mode  # read when the GPU device is created
            for one in gpus:
                tf.config.experimental.set_memory_growth(one, memory_growth())
            self.device = "/GPU:0"
        else:
            if gpus:
                tf.config.set_visible_devices([], "GPU")
            self.device = "/CPU:0"

    def seed(self, seed: int) -> None:
        keras.utils.set_random_seed(seed)

    def build_training(self) -> ParamCount:
        cfg = self.cfg
        if self.amp_dtype:
            keras.mixed_precision.set_global_policy("mixed_" + self.amp_dtype)
        with tf.device(self.device):
            self.model = MODELS[cfg.model](cfg.image_size, cfg.num_classes)
            optimizer = keras.optimizers.SGD(learning_rate=cfg.lr, momentum=cfg.momentum)
            if self.amp_dtype == "float16":  # float16 needs its loss scaled; bfloat16 does not
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

    def prepare_memory(self, held: MemorySet) -> None:
        """The set handed over by DLPack (no copy; tf.data would copy it twice: a graph constant, and a
        shuffle buffer of every image, as would tf.convert_to_tensor); tf.data shuffles and batches indices."""
        self._memory_images = tf.experimental.dlpack.from_dlpack(held.images.__dlpack__())
        indices = np.arange(len(held.labels), dtype=np.int64)
        dataset = tf.data.Dataset.from_tensor_slices((indices, held.labels))
        dataset = dataset.shuffle(len(held.labels), seed=self.cfg.seed, reshuffle_each_iteration=True)
        self._memory_dataset = dataset.batch(self.cfg.batch)

    def memory_batches(self, epoch: int) -> Any:
        """Shuffled, batched indices from tf.data, gathered from the set held as one tensor."""
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
