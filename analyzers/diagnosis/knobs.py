"""The setting to try, named as each framework names it, with the tracer option that sets it."""

from __future__ import annotations

# (framework) -> {what: framework's own setting}
_SETTINGS: dict[str, dict[str, str]] = {
    "pytorch": {
        "workers": "torch.utils.data.DataLoader(num_workers=...)",
        "prefetch": "DataLoader(prefetch_factor=...)",
        "threads": "torch.set_num_threads(...)",
        "allocator": "PYTORCH_CUDA_ALLOC_CONF (the caching allocator's settings)",
        "launch": "torch.compile / CUDA graphs (torch.cuda.graphs)",
        "sync": "read loss.item() every N steps, not every step",
        "startup": "torch.backends.cudnn.benchmark (autotuning on the first steps)",
    },
    "tensorflow": {
        "workers": "tf.data Dataset.map(num_parallel_calls=...)",
        "prefetch": "tf.data Dataset.prefetch(buffer_size=...)",
        "threads": "tf.config.threading.set_intra_op_parallelism_threads(...)",
        "allocator": "TF_GPU_ALLOCATOR (cuda_malloc_async) / the BFC allocator's growth",
        "launch": "tf.function(jit_compile=True) (XLA fuses kernels)",
        "sync": "steps_per_execution / reading the loss less often",
        "startup": "tf.function retracing (fixed input signatures)",
    },
    "mxnet": {
        "workers": "gluon.data.DataLoader(num_workers=...)",
        "prefetch": "gluon.data.DataLoader(prefetch=...)",
        "threads": "MXNET_OMP_MAX_THREADS / MXSetNumOMPThreads",
        "allocator": "MXNET_GPU_MEM_POOL_TYPE",
        "launch": "HybridBlock.hybridize(static_alloc=True, static_shape=True)",
        "sync": "reading the loss (asnumpy) less often",
        "startup": "MXNET_CUDNN_AUTOTUNE_DEFAULT (cuDNN autotuning)",
    },
    "paddle": {
        "workers": "paddle.io.DataLoader(num_workers=...)",
        "prefetch": "paddle.io.DataLoader(prefetch_factor=...)",
        "threads": "paddle.base.core.set_num_threads(...) / CPU_NUM",
        "allocator": "FLAGS_allocator_strategy=auto_growth",
        "launch": "paddle.jit.to_static (static graph)",
        "sync": "reading the loss (numpy()) less often",
        "startup": "FLAGS_cudnn_exhaustive_search",
    },
    "singa": {
        "workers": "none (NumPy batches in the loop): a smaller image pipeline",
        "prefetch": "none in SINGA's Python API",
        "threads": "OMP_NUM_THREADS",
        "allocator": "SINGA's device memory pool (Platform.set_memory_pool)",
        "launch": "model.compile(use_graph=True)",
        "sync": "reading the loss less often",
        "startup": "model.compile(use_graph=...)",
    },
}
_TRACER_OPTION = {
    "workers": "--workers",
    "prefetch": "--prefetch",
    "threads": "--threads",
}


def knob(framework: str, what: str, advice: str = "") -> str:
    """E.g. `more loader workers: torch.utils.data.DataLoader(num_workers=...) (tracer --workers)`."""
    setting = _SETTINGS.get(framework, {}).get(what, what)
    option = _TRACER_OPTION.get(what)
    text = f"{advice}: {setting}" if advice else setting
    return f"{text} (tracer {option})" if option else text
