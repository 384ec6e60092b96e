"""Every framework the tool trains with, declared once: its environment recipe, its worker module, its
colour and name in charts, the knobs the diagnosis names and the words its settings are written in.

The CLI's choices, `tracer env`, the worker config, `analyzers.render.palette` and `analyzers.diagnosis.knobs`
all read `FRAMEWORKS`; adding a framework is one entry here and one worker module. A lookup of a name
that is not here is an error (`framework_info`), never a silent default.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from tracer.core.errors import UserError


class Tuning(str, enum.Enum):
    """What a diagnosis knob adjusts; each framework names its own setting for each (or has none)."""

    WORKERS = "workers"  # parallel decoders of the input pipeline
    PREFETCH = "prefetch"  # batches prepared ahead
    THREADS = "threads"  # intra-op threads
    ALLOCATOR = "allocator"  # the device memory allocator
    LAUNCH = "launch"  # fewer host round trips per step: graphs, compilation, fusion
    SYNC = "sync"  # how often the host reads a device value
    STARTUP = "startup"  # what the first steps pay for (autotuning, tracing, compiling)
    PRECISION = "precision"  # mixed precision: the tensor cores' faster dtypes (fp16/bf16)
    LAYOUT = "layout"  # channels-last tensors, the layout tensor-core convolutions read without transposing


@dataclass(frozen=True)
class Setting:
    """A framework's own setting for one `Tuning`, as a user writes it, and the devices where it acts."""

    text: str
    devices: frozenset[str] = frozenset({"cpu", "gpu"})


def gpu(text: str) -> Setting:
    return Setting(text, frozenset({"gpu"}))


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    label: str  # the name as its authors write it
    colour: str  # '#RRGGBB', the same in every chart, table and page
    import_name: str
    dist_names: tuple[str, ...]  # the first one installed gives the version
    cpu_requirements: tuple[str, ...]
    gpu_requirements: tuple[str, ...]
    worker_module: str  # the module (run in the framework's interpreter) whose `Trainer` trains
    # Every `Tuning`, each with the framework's setting or None where it has none (checked below).
    settings: Mapping[Tuning, Setting | None]
    # Words that only this framework's settings contain (case-insensitive): a knob shown for another
    # framework's run must hold none of them.
    api_words: tuple[str, ...]
    # run.json knob keys the worker writes for its intra-op threads and its loader workers
    intra_op_knob: str | None = None
    workers_knob: str | None = None
    note: str = ""
    # The module of its models (tracer/worker/models/), one entry per model of `options.MODELS`; the trainer
    # imports it itself, the parity test reads it from here.
    models_module: str = ""
    # The interpreter the environment must be made from ("3.6": SINGA's only PyPI wheel is cp36);
    # empty: the tool's own interpreter.
    python_version: str = ""
    # Installed (upgraded) first, alone: the venv's own pip may be too old for the wheels' tags.
    pip_bootstrap: tuple[str, ...] = ()
    # What the examples/ scripts in this framework import beyond it (Lightning, transformers' Trainer),
    # installed into its environment after it; the built-in workload never imports them.
    example_requirements: tuple[str, ...] = ()
    # Whether its worker trains with `--amp` (SINGA's float16 mode converts the whole model: refused).
    amp: bool = True
    # Whether a step returns before its work is done on any device, the work landing wherever the
    # framework next blocks (JAX's dispatch, MXNet's engine): its steps' compute/sync split means nothing.
    asynchronous: bool = False

    def setting(self, tuning: Tuning, device: str) -> str | None:
        """The framework's own setting for `tuning` on `device`, or None where it has none there."""
        s = self.settings[tuning]
        return s.text if s is not None and device in s.devices else None


T = Tuning
_DECLARED: tuple[FrameworkInfo, ...] = (
    FrameworkInfo(
        "pytorch",
        "PyTorch",
        "#D55E00",  # Okabe-Ito vermillion (distinguishable with the common colour-vision deficiencies)
        "torch",
        ("torch",),
        # pip takes these from the local wheel store; torch 2.13.0's CPU wheel has a broken torchvision.
        ("torch==2.14.1", "torchvision==0.29.1", "numpy", "pillow"),
        ("torch==2.14.1", "torchvision==0.29.1", "numpy", "pillow"),
        "tracer.worker.frameworks.pytorch",
        {
            T.WORKERS: Setting("torch.utils.data.DataLoader(num_workers=...)"),
            T.PREFETCH: Setting("torch.utils.data.DataLoader(prefetch_factor=...)"),
            T.THREADS: Setting("torch.set_num_threads(...)"),
            T.ALLOCATOR: gpu("PYTORCH_CUDA_ALLOC_CONF (the caching allocator's settings)"),
            T.LAUNCH: gpu('torch.compile(mode="reduce-overhead") or CUDA graphs (torch.cuda.CUDAGraph)'),
            T.SYNC: Setting("read loss.item() every N steps, not every step"),
            T.STARTUP: gpu("torch.backends.cudnn.benchmark=False (no cuDNN autotuning in the first steps)"),
            T.PRECISION: gpu('torch.autocast("cuda", dtype=torch.bfloat16) with torch.amp'),
            T.LAYOUT: gpu("model.to(memory_format=torch.channels_last) and the batches likewise"),
        },
        ("torch", "pytorch_"),
        intra_op_knob="torch.set_num_threads",
        workers_knob="DataLoader.num_workers",
        note="the 2.14.1 wheel is a CUDA build: the same environment serves CPU and GPU",
        models_module="tracer.worker.models.pytorch",
        example_requirements=("lightning==2.6.6", "transformers==5.24.0", "accelerate==1.15.0"),
    ),
    FrameworkInfo(
        "tensorflow",
        "TensorFlow",
        "#0072B2",  # blue
        "tensorflow",
        ("tensorflow-cpu", "tensorflow"),
        ("tensorflow-cpu==2.21.0", "pillow"),
        ("tensorflow[and-cuda]==2.21.0", "pillow"),
        "tracer.worker.frameworks.tensorflow",
        {
            T.WORKERS: Setting("tf.data.Dataset.map(num_parallel_calls=...)"),
            T.PREFETCH: Setting("tf.data.Dataset.prefetch(buffer_size=...)"),
            T.THREADS: Setting("tf.config.threading.set_intra_op_parallelism_threads(...)"),
            T.ALLOCATOR: gpu("TF_GPU_ALLOCATOR=cuda_malloc_async (or the BFC allocator's growth)"),
            T.LAUNCH: gpu("tf.function(jit_compile=True) (XLA fuses the step's kernels)"),
            T.SYNC: Setting("read the loss (Tensor.numpy()) every N steps, not every step"),
            T.STARTUP: Setting("tf.function(input_signature=...) (no retracing for new shapes)"),
            T.PRECISION: gpu('keras.mixed_precision.set_global_policy("mixed_float16")'),
            T.LAYOUT: None,  # Keras convolutions are channels-last already
        },
        ("tf.", "tf_", "tensorflow"),
        intra_op_knob="tf.config.threading.intra_op_parallelism_threads",
        workers_knob="tf.data.map.num_parallel_calls",
        models_module="tracer.worker.models.tensorflow",
    ),
    FrameworkInfo(
        "mxnet",
        "MXNet",
        "#009E73",  # bluish green
        "mxnet",
        ("mxnet", "mxnet-cu112"),
        # MXNet 1.9.1 uses np.bool, removed in NumPy 1.24.
        ("mxnet==1.9.1", "numpy==1.23.5", "pillow"),
        ("mxnet-cu112==1.9.1", "numpy==1.23.5", "pillow"),
        "tracer.worker.frameworks.mxnet",
        {
            T.WORKERS: Setting("mxnet.gluon.data.DataLoader(num_workers=...)"),
            T.PREFETCH: Setting("mxnet.gluon.data.DataLoader(prefetch=...)"),
            T.THREADS: Setting("MXNET_OMP_MAX_THREADS (mxnet's OpenMP threads)"),
            T.ALLOCATOR: gpu("MXNET_GPU_MEM_POOL_TYPE"),
            T.LAUNCH: gpu("mxnet HybridBlock.hybridize(static_alloc=True, static_shape=True)"),
            T.SYNC: Setting("read the loss (mxnet NDArray.asnumpy()) every N steps, not every step"),
            T.STARTUP: gpu("MXNET_CUDNN_AUTOTUNE_DEFAULT=0 (no cuDNN autotuning in the first steps)"),
            T.PRECISION: gpu("mxnet.contrib.amp.init() and amp.init_trainer(trainer)"),
            T.LAYOUT: None,
        },
        ("mxnet", "gluon", "hybridize"),
        intra_op_knob="MXSetNumOMPThreads",
        workers_knob="gluon.data.DataLoader.num_workers",
        asynchronous=True,
        models_module="tracer.worker.models.mxnet",
    ),
    FrameworkInfo(
        "paddle",
        "PaddlePaddle",
        "#CC79A7",  # reddish purple
        "paddle",
        ("paddlepaddle", "paddlepaddle-gpu"),
        ("paddlepaddle==3.3.1", "pillow"),
        ("paddlepaddle-gpu==3.3.1", "pillow"),
        "tracer.worker.frameworks.paddle",
        {
            T.WORKERS: Setting("paddle.io.DataLoader(num_workers=...)"),
            T.PREFETCH: Setting("paddle.io.DataLoader(prefetch_factor=...)"),
            T.THREADS: Setting("paddle.base.core.set_num_threads(...)"),
            T.ALLOCATOR: gpu("FLAGS_allocator_strategy=auto_growth (paddle's allocator)"),
            T.LAUNCH: gpu("paddle.jit.to_static (a static graph)"),
            T.SYNC: Setting("read the loss (paddle Tensor.numpy()) every N steps, not every step"),
            T.STARTUP: None,  # the worker leaves FLAGS_cudnn_exhaustive_search off: nothing to turn off
            T.PRECISION: gpu("paddle.amp.auto_cast() with paddle.amp.GradScaler"),
            T.LAYOUT: None,
        },
        ("paddle", "flags_"),
        intra_op_knob="paddle.base.core.set_num_threads",
        workers_knob="paddle.io.DataLoader.num_workers",
        models_module="tracer.worker.models.paddle",
    ),
    FrameworkInfo(
        "singa",
        "SINGA",
        "#E69F00",  # orange
        "singa",
        ("singa", "singa-cpu", "singa-gpu"),
        # PyPI's only SINGA build: a CPython 3.6 manylinux2014 CPU wheel. NumPy 1.19.5 and Pillow 8.4.0
        # are the last releases for 3.6; `dataclasses` is the 3.6 backport the worker imports.
        ("singa==3.0.0.dev1", "numpy==1.19.5", "dataclasses==0.8", "pillow==8.4.0"),
        ("singa==3.0.0.dev1", "numpy==1.19.5", "dataclasses==0.8", "pillow==8.4.0"),
        "tracer.worker.frameworks.singa",
        {
            T.WORKERS: Setting("multiprocessing.Pool(processes=...) decoding batches (SINGA has no loader of its own)"),
            T.PREFETCH: Setting("batches in flight per decode process (multiprocessing.Pool.apply_async ahead)"),
            T.THREADS: Setting("OMP_NUM_THREADS (singa's CPU kernels)"),
            T.ALLOCATOR: gpu("singa's device memory pool (singa.device.create_cuda_gpu)"),
            T.LAUNCH: gpu("singa Model.compile(use_graph=True) (the step's operations buffered as a graph)"),
            T.SYNC: Setting("read the loss (singa tensor.to_numpy()) every N steps, not every step"),
            T.STARTUP: None,
            T.PRECISION: None,
            T.LAYOUT: None,
        },
        ("singa",),
        workers_knob="multiprocessing.Pool.processes",
        note="PyPI's SINGA wheel is CPU-only: for a GPU build, `tracer profile --python` an interpreter with one",
        python_version="3.6",
        # pip 18.1 (Python 3.6's own) rejects the manylinux2014 tag; 21.3.1 is the last pip for 3.6.
        pip_bootstrap=("pip<22",),
        amp=False,
        models_module="tracer.worker.models.singa",
    ),
    FrameworkInfo(
        "jax",
        "JAX",
        "#56B4E9",  # sky blue (lighter than TensorFlow's blue)
        "jax",
        ("jax",),
        # jax 0.10.2 is the last release for Python 3.11 (the venvs here); grain is the input pipeline.
        ("jax==0.10.2", "jaxlib==0.10.2", "flax==0.12.8", "optax==0.2.8", "grain==0.2.18", "pillow"),
        ("jax[cuda13]==0.10.2", "flax==0.12.8", "optax==0.2.8", "grain==0.2.18", "pillow"),
        "tracer.worker.frameworks.jax",
        {
            T.WORKERS: Setting("grain.MultiprocessingOptions(num_workers=...) in IterDataset.mp_prefetch"),
            T.PREFETCH: Setting("grain.MultiprocessingOptions(per_worker_buffer_size=...)"),
            T.THREADS: Setting("XLA_FLAGS=intra_op_parallelism_threads=N (jax's CPU backend)"),
            T.ALLOCATOR: gpu("XLA_PYTHON_CLIENT_ALLOCATOR / XLA_PYTHON_CLIENT_PREALLOCATE (jax's GPU memory)"),
            T.LAUNCH: gpu("one jax.jit over the whole step with donated buffers (donate_argnums)"),
            T.SYNC: Setting("read the loss (jax.device_get) every N steps, not every step"),
            T.STARTUP: Setting(
                'jax\'s persistent compilation cache (jax.config.update("jax_compilation_cache_dir", ...))'
            ),
            T.PRECISION: gpu("bfloat16 compute: the flax modules' dtype=jnp.bfloat16, parameters kept in float32"),
            T.LAYOUT: None,  # flax convolutions are channels-last already
        },
        ("jax", "grain", "xla_python"),
        workers_knob="grain.MultiprocessingOptions.num_workers",
        note="the CUDA build is the jax[cuda13] extra: it needs an NVIDIA driver for CUDA 13",
        asynchronous=True,
        models_module="tracer.worker.models.jax",
    ),
)


def _check(declared: tuple[FrameworkInfo, ...]) -> dict[str, FrameworkInfo]:
    """Refuses a declaration that would make some consumer guess: a missing tuning, a reused colour."""
    by_name: dict[str, FrameworkInfo] = {}
    for f in declared:
        missing = [t.value for t in Tuning if t not in f.settings]
        if missing:
            raise ValueError(f"framework {f.name!r} declares no setting (or None) for: {', '.join(missing)}")
        if f.name in by_name or any(o.colour.lower() == f.colour.lower() for o in by_name.values()):
            raise ValueError(f"framework {f.name!r} declared twice or with another framework's colour")
        by_name[f.name] = f
    return by_name


FRAMEWORKS: dict[str, FrameworkInfo] = _check(_DECLARED)


def framework_info(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError(f"unknown framework '{name}': choose one of {', '.join(FRAMEWORKS)}") from None
