"""JAX: Flax (linen) models that mirror torchvision layer for layer (tracer/worker/models/jax.py), optax SGD,
grain as the input pipeline.

JAX compiles the train step for each new batch shape. That compilation is done ahead of time, outside the
step, and reported as a `compile` event (Event.COMPILE) inside an NVTX range `compile`, so that
summaries can tell compilation from training.
"""

import contextlib
import itertools
import os
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
import grain  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from absl import flags  # noqa: E402 - grain's flags (absl ships with grain)

from tracer.worker import base  # noqa: E402
from tracer.worker.base import EpochStats, ParamCount  # noqa: E402
from tracer.worker.memory_data import MemorySet  # noqa: E402
from tracer.worker.models.jax import MODELS, count_params  # noqa: E402
from tracer.worker.reporting import Reporter  # noqa: E402
from tracer.worker.schema import Event  # noqa: E402
from tracer.worker.workload import MEAN, STD, ImageList, WorkloadConfig, load_pixels  # noqa: E402

# Each loader process decodes whole batches in its own main thread (grain.ReadOptions in the process):
# no reader threads, so --workers N is N decoders, each free of the others' interpreter lock.
THREADS_PER_LOADER_PROCESS = 0
INPUT_DTYPE = "uint8 (decoded, resized, cropped, flipped in the loader; normalised on the device in the step)"


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
    PEAK_MEMORY_SOURCE = "jax.Device.memory_stats()['peak_bytes_in_use']"
    # bfloat16 on CPU and GPU alike: it needs no loss scaling, which optax does not provide.
    AMP_DTYPES = {"gpu": "bfloat16", "cpu": "bfloat16"}

    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        base.Trainer.__init__(self, cfg, images, reporter)
        self._compiled: Dict[Tuple[int, ...], Any] = {}  # the train step compiled per batch shape
        self._prepares: Dict[Tuple[int, ...], Any] = {}  # --data memory's flip compiled per batch shape
        # The run's one batch iterator: made in the first epoch, so that grain's processes start in its
        # first step's data wait, as PyTorch's persistent workers do.
        self._batches: Optional[Iterator[Any]] = None
        self._memory_run: Optional[Iterator[Any]] = None  # --data memory: grain over the set, for the run
        self._memory_steps = itertools.count()  # --data memory: this epoch's steps, for the flip keys
        self._memory_epoch = 0

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

    def knobs(self) -> Dict[str, object]:
        workers = self._workers()
        return {
            "grain.MultiprocessingOptions.num_workers": workers,
            "grain.MultiprocessingOptions.per_worker_buffer_size": self._prefetch() if workers else None,
            "grain.ReadOptions.num_threads": THREADS_PER_LOADER_PROCESS,
            "grain.ReadOptions.prefetch_buffer_size": 0,
            "input dtype": INPUT_DTYPE,
            "XLA_FLAGS": os.environ.get("XLA_FLAGS") or None,
            # A persistent compilation cache turns the first epoch's compile into a read: say which was used.
            "jax_compilation_cache_dir": jax.config.jax_compilation_cache_dir or None,
            PREALLOCATE_ENV: os.environ.get(PREALLOCATE_ENV),
            PREALLOCATE_ENV + " from": PREALLOCATE_FROM,
            "compute_dtype": self.amp_dtype or "float32",
            "param_dtype": "float32",
        }

    def check_knobs(self) -> None:
        base.Trainer.check_knobs(self)
        cfg = self.cfg
        for name, value, least in (("--workers", cfg.workers, 0), ("--prefetch", cfg.prefetch, 1)):
            if isinstance(value, int) and value < least:
                raise ValueError("%s %d: grain and XLA need at least %d" % (name, value, least))

    def set_threads(self, threads: int) -> None:
        """XLA's CPU threads, by XLA_FLAGS: read when its CPU client starts, with the first array."""
        flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=%d" % threads
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()

    def gpu_missing(self) -> str:
        backend = jax.default_backend()
        return "" if backend == "gpu" else "JAX's backend is %s (install jax[cuda13])" % backend

    def use_device(self, gpu: bool) -> None:
        self.device = jax.devices("gpu" if gpu else "cpu")[0]

    def seed(self, seed: int) -> None:
        """JAX has no global generator: every key below comes from --seed."""
        self.dropout_key = jax.random.PRNGKey(seed + 1)
        self.flip_key = jax.device_put(jax.random.PRNGKey(seed + 2), self.device)

    def build_training(self) -> ParamCount:
        cfg = self.cfg
        dtype = jnp.bfloat16 if self.amp_dtype else jnp.float32
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
        self._jitted = jax.jit(self._train_step, donate_argnums=(0, 1, 2))
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

    def prepare_memory(self, held: MemorySet) -> None:
        """grain over an in-memory source, shuffled as the files pipeline is (one dataset for the run,
        shuffled with --seed and repeated for the epochs, so each epoch gets grain's next permutation),
        batched in the loop's thread."""
        dataset = (
            grain.MapDataset.source(_ArraySource(held.images, held.labels))
            .shuffle(seed=self.cfg.seed)
            .batch(self.cfg.batch)
            .repeat(self.cfg.epochs)
        )
        # grain's advice for data already in memory: no reader threads, no read-ahead buffer.
        self._memory_run = iter(dataset.to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)))

    def memory_batches(self, epoch: int) -> Any:
        """This epoch's share of the run's batches of the set."""
        assert self._memory_run is not None and self.memory_set is not None
        self._memory_steps = itertools.count()
        self._memory_epoch = epoch
        return itertools.islice(self._memory_run, -(-len(self.memory_set.labels) // self.cfg.batch))

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """uint8 NHWC to the device and a random flip there, in one compiled function (compiled ahead per
        batch shape, reported as a `compile` event like the train step); the step normalises, as for files."""
        x_host, y_host = batch
        x = jax.device_put(x_host, self.device)
        key = jax.random.fold_in(jax.random.fold_in(self.flip_key, self._memory_epoch), next(self._memory_steps))
        shape = tuple(x.shape)
        compiled = self._prepares.get(shape)
        if compiled is None:
            with self._compiling("prepare", list(shape)):
                compiled = jax.jit(_prepare, static_argnums=(2,)).lower(x, key, self.flip_memory).compile()
            self._prepares[shape] = compiled
        return compiled(x, key), jax.device_put(y_host, self.device)

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
