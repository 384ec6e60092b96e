"""The names the worker writes and the tracer reads: event kinds, file names, CUPTI record columns.

Worker side (Python 3.6, standard library only). The rest of the tool reaches these names through
`tracer.core.schema`, the one module allowed to import this one, so worker and tracer cannot drift.
"""

from typing import Any, Dict, Optional  # noqa: F401 - Optional is read in a type comment (Python 3.6)

from tracer.worker import cupti_layout as CUPTI_LAYOUT  # noqa: F401, N812 - layouts cross the boundary as one module
from tracer.worker.probe_reach import kept_out as probe_kept_out  # noqa: F401 - the probe's and the tool's reasons

# --- events.jsonl: one JSON object per line, {"kind": ..., "t_ns": ..., fields}
EVENTS_FILE = "events.jsonl"
WORKER_CONFIG_FILE = "worker_config.json"
WORKER_PID_FILE = "worker.pid"
KIND = "kind"  # the key that names an event's kind
T_NS = "t_ns"  # the key of an event's Unix-epoch time in ns
#: An epoch_end's key, true for an epoch the run left before its end (a failure, Ctrl-C, a shorter last
#: pass): the epoch is kept apart and out of every epoch figure.
PARTIAL = "partial"


class Event(object):
    """Event kinds, in the order a run emits them."""

    START = "start"  # the worker is up: pid, python
    DATASET = "dataset"  # images in the folder and used, classes
    VERSIONS = "versions"  # framework and package versions
    PHASE = "phase"  # a named phase begins (build, compile ...)
    MODEL = "model"  # parameter counts and the knobs as the framework applied them
    EPOCH_START = "epoch_start"
    PROGRESS = "progress"  # at most every half second: images so far, last loss
    EPOCH_END = "epoch_end"  # images, loss; PARTIAL where the epoch was interrupted
    END = "end"  # the worker finished every epoch
    ERROR = "error"  # the framework's own cause, and the stage it failed in
    TRACE_ERROR = "trace_error"  # a tracer inside the worker failed; training went on
    TRACE_OVERHEAD = "trace_overhead"  # what an in-worker tracer recorded and what it cost
    COMPILE = "compile"  # a JIT compilation (JAX): state start/end, function, batch_shape, seconds on end
    DIVERGED = "diverged"  # the first non-finite loss: epoch, step, images, loss, last_finite_loss, lr, continued
    DECODE = "decode"  # --data memory: the set decoded into host memory, state start/end (end: images, bytes, seconds)
    TRACE_WINDOW = "trace_window"  # the trace window's edge: edge "open" (tracing began) or "close" (about to stop)
    LOADER = "loader"  # the probe saw an input pipeline iterated: its probe name and settings (num_workers ...)
    FLOPS = "flops"  # the probe counted one training step's FLOPs: FLOPS_PER_STEP, FLOPS_COUNTER (or FLOPS_NOT_COUNTED)
    PROBE_MISSED = "probe_missed"  # a probed process started a Python the probe cannot enter: argv, reason

    ALL = (
        START,
        DATASET,
        VERSIONS,
        PHASE,
        MODEL,
        EPOCH_START,
        PROGRESS,
        EPOCH_END,
        END,
        ERROR,
        TRACE_ERROR,
        TRACE_OVERHEAD,
        COMPILE,
        DIVERGED,
        DECODE,
        TRACE_WINDOW,
        LOADER,
        FLOPS,
        PROBE_MISSED,
    )


#: A `flops` event's fields: one training step's FLOPs (multiply-add = 2), the counter that counted them, or
#: why the step could not be counted.
FLOPS_PER_STEP = "flops_per_step"
FLOPS_COUNTER = "counter"
FLOPS_NOT_COUNTED = "not_counted"

#: A `trace_window` event's field WINDOW_EDGE: WINDOW_OPEN once tracing runs, WINDOW_CLOSE just before it stops.
WINDOW_EDGE = "edge"
WINDOW_OPEN = "open"
WINDOW_CLOSE = "close"
# --- environment variables the tracer sets for the worker
#: Which tracer the worker starts inside itself: TRACE_CUPTI, TRACE_TORCH, NATIVE_TRACE or NSYS_WINDOW_TRACE
#: (unset: none).
TRACE_ENV = "TRACER_TRACE"
TRACE_CUPTI = "cupti"  # the CUPTI Activity API collector (tracer/worker/cupti_trace.py)
TRACE_TORCH = "torch"  # the PyTorch profiler (tracer/worker/torch_trace.py)
#: The trace window's bounds as JSON (`tracer.core.window.TraceWindow.worker_bounds`), for the probe of a
#: command under `--trace torch` (the built-in worker reads its own from worker_config.json); unset: the whole run.
TRACE_WINDOW_ENV = "TRACER_TRACE_WINDOW"
#: The PyTorch profiler's trace under raw/ (`--trace torch`); a command's ranks write one each, TORCH_RANK_TRACE % rank.
TORCH_TRACE = "kineto.json.gz"
TORCH_RANK_TRACE = "kineto-rank%d.json.gz"
NATIVE_TRACE = "native"  # the framework's own profiler over the trace window (tracer/worker/native_trace.py)
#: The tracer's pid: the worker dies with it (tracer/worker/lifeline.py).
TRACER_PID_ENV = "DL_TRACER_PID"
#: "1": the CUPTI collector keeps the calls it otherwise switches off at the source (Kineto's list).
CUPTI_ALL_CALLS_ENV = "TRACER_CUPTI_ALL_CALLS"
#: TRACE_ENV's value when nsys traces a window: the worker then opens the NVTX range below around it.
NSYS_WINDOW_TRACE = "nsys-window"
#: What `--trace native` leaves under raw/, by framework: the file each framework's own profiler writes
#: (PyTorch's Kineto JSON; XPlane from jax.profiler and TensorFlow's profiler; paddle.profiler's and
#: MXNet's Chrome-trace JSON). A framework not named here has no profiler of its own (SINGA).
NATIVE_TRACE_FILES = {
    "pytorch": TORCH_TRACE,
    "jax": "native.xplane.pb",
    "tensorflow": "native.xplane.pb",
    "paddle": "paddle_profile.json",
    "mxnet": "mxnet_profile.json",
}
#: The NVTX range the worker opens around its trace window; nsys's capture range (`--nvtx-capture`) starts on it.
NVTX_WINDOW_RANGE = "dl-tracer trace window"

#: What the worker does at the first non-finite loss (--on-divergence): stop (the run ends `diverged`),
#: or continue training, the run still marked `diverged`.
ON_DIVERGENCE = ("stop", "continue")
FAULT_KINDS = ("raise", "abort", "segv", "hang", "stall", "leak")
"""What `--inject-fault KIND@EPOCH` can inject (tracer/worker/main.py `_inject_fault`)."""
EXIT_DIVERGED = 5  # the worker's exit code when it stopped at a divergence (its `diverged` event says where)


#: Where the batches come from (--data): files (each framework's pipeline from the JPEGs), memory (decoded
#: once before the first epoch, batched from RAM), synthetic (one random batch made once on the device).
DATA_MODES = ("files", "memory", "synthetic")
DATA_FILES, DATA_MEMORY, DATA_SYNTHETIC = DATA_MODES
#: How the batches are decoded and resized (--pipeline): native (each framework's own operators) or shared (one
#: PIL loader for all, identical pixels).
PIPELINES = ("native", "shared")
#: --workers' one word: tf.data chooses its own parallelism (TensorFlow only).
AUTOTUNE = "autotune"


# --- JSON: every file the tool writes is strict JSON (no NaN, Infinity); a non-finite number is written
# as null and named, with how it was non-finite, under NONFINITE: {"loss": "nan"}, {"epochs.2.loss": "inf"}.
NONFINITE = "nonfinite"


def nonfinite_name(value: float) -> str:
    """ "nan", "inf" or "-inf": how a float that JSON cannot hold is named in NONFINITE."""
    if value != value:
        return "nan"
    return "inf" if value > 0 else "-inf"


def strict_json(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by null; a dict at the top gets a NONFINITE map
    of the dotted path of each replaced number to its name (other values are returned as they are
    cleaned, the names lost only where there is no dict to hold them)."""
    found = {}  # type: Dict[str, str]
    clean = _clean(value, "", found)
    if found and isinstance(clean, dict):
        clean[NONFINITE] = dict(clean.get(NONFINITE) or {}, **found)
    return clean


def _clean(value: Any, path: str, found: Dict[str, str]) -> Any:
    if isinstance(value, float) and (value != value or value in (_INF, -_INF)):
        found[path or "."] = nonfinite_name(value)
        return None
    if isinstance(value, dict):
        return {k: _clean(v, _join(path, k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v, _join(path, i), found) for i, v in enumerate(value)]
    return value


def _join(path: str, key: Any) -> str:
    return "%s.%s" % (path, key) if path else str(key)


_INF = float("inf")


# --- samples/steps.csv: one row per training step, written by the worker (base.Trainer.run_epoch)
SAMPLES_DIR = "samples"
STEPS_TABLE = "steps"
DATA_WAIT_S = "data_wait_s"  # waiting for the next batch from the input pipeline
COMPUTE_S = "compute_s"  # forward, backward and update, as dispatched
SYNC_S = "sync_s"  # the host-device synchronisation that reads the loss (0 on steps without one)
RANK = "rank"  # the process's rank in a data-parallel run (0 for a single process)
PROBE = "probe"  # who saw the step: PROBE_WORKER for the built-in workload, else one of Probe
STEP_COLUMNS = ("epoch", "step", "images", "start_ns", DATA_WAIT_S, COMPUTE_S, SYNC_S, RANK, PROBE)
PROBE_WORKER = "worker"
STEP_HEADER = ",".join(STEP_COLUMNS) + "\n"


def step_row(epoch, step, images, start_ns, data_wait_s, compute_s, sync_s, rank, probe):
    # type: (int, int, Optional[int], int, Optional[float], float, float, int, str) -> str
    """One line of STEP_COLUMNS, as the worker and the probe both write it (the one writer of a step):
    `images` None where the step's samples were not counted, `data_wait_s` None where the wait for its
    batch was not seen (an empty field each, read back as null)."""
    shown_images = "" if images is None else "%d" % images
    wait = "" if data_wait_s is None else "%.9f" % data_wait_s
    row = (epoch, step, shown_images, start_ns, wait, compute_s, sync_s, rank, probe)
    return "%d,%d,%s,%d,%s,%.9f,%.9f,%d,%s\n" % row


# --- the probe (tracer/probe/) inside every Python process of a user's command (`tracer profile -- COMMAND`)
#: The run folder, given to the command's processes; the probe records nothing where it is unset.
PROBE_RUN_DIR_ENV = "DL_TRACER_RUN_DIR"
#: Each probed process writes its steps to samples/STEPS_TABLE-<pid>.csv (no two writers share a file);
#: the tracer joins them into the steps table when the run ends.
PROBE_STEPS_SEPARATOR = "-"
#: The probe's source folder in the tool (tracer/probe/), staged into a command's path as PROBE_MODULE.
PROBE_SOURCE_DIR = "probe"
#: The module name the probe (and its marker, `from dltracer_probe import timed_epoch`) has in a command's processes.
PROBE_MODULE = "dltracer_probe"
#: The marker's name (`for batch in timed_epoch(loader)`), and its first spelling, still exported.
PROBE_MARKER, PROBE_MARKER_OLD = "timed_epoch", "steps"
#: A `loader` event's probe name for facts about the model the probe read (its class count, `classes`).
MODEL_FACTS, CLASSES = "model", "classes"
#: Ranks of a data-parallel launch, as torchrun and most launchers set them.
RANK_ENV, LOCAL_RANK_ENV, WORLD_SIZE_ENV = "RANK", "LOCAL_RANK", "WORLD_SIZE"


class Probe(object):
    """Who saw a command's steps (the steps table's PROBE column and `loader` events)."""

    TORCH_DATALOADER = "torch.DataLoader"
    TORCH_OPTIMIZER = "torch.optimizer"  # optimizer.step() counted, where no DataLoader is iterated
    KERAS_OPTIMIZER = "keras.apply_gradients"  # an eager apply_gradients counted, where no pipeline is iterated
    PADDLE_OPTIMIZER = "paddle.optimizer"  # optimizer.step() in dygraph
    MXNET_TRAINER = "gluon.Trainer"  # trainer.step()
    SINGA_OPTIMIZER = "singa.opt"  # an optimizer call (its update of every parameter)
    OPTAX_UPDATE = "optax.update"  # a transformation's update() run outside jit (inside it, traced once)
    MARKER = "marker"  # the script's own `for batch in steps(loader)`
    KERAS_FIT = "keras.fit"
    TF_DATA = "tf.data"
    GRAIN = "grain"
    GLUON_DATALOADER = "gluon.DataLoader"
    PADDLE_DATALOADER = "paddle.io.DataLoader"
    PADDLE_FIT = "paddle.Model.fit"

    #: Steps counted from optimizer updates: no batch seen, so no data wait and no samples.
    OPTIMIZERS = (TORCH_OPTIMIZER, KERAS_OPTIMIZER, PADDLE_OPTIMIZER, MXNET_TRAINER, SINGA_OPTIMIZER, OPTAX_UPDATE)
    #: Steps whose wait for their batch happens inside a compiled graph, where the probe does not see it.
    IN_GRAPH_INPUT = (KERAS_FIT,)

    ALL = (
        TORCH_DATALOADER,
        TORCH_OPTIMIZER,
        KERAS_OPTIMIZER,
        PADDLE_OPTIMIZER,
        MXNET_TRAINER,
        SINGA_OPTIMIZER,
        OPTAX_UPDATE,
        MARKER,
        KERAS_FIT,
        TF_DATA,
        GRAIN,
        GLUON_DATALOADER,
        PADDLE_DATALOADER,
        PADDLE_FIT,
    )


#: The top-level module each probed framework is imported as -> its framework name (tracer.core.frameworks).
PROBED_IMPORTS = {
    "torch": "pytorch",
    "tensorflow": "tensorflow",
    "keras": "tensorflow",
    "jax": "jax",
    "grain": "jax",
    "mxnet": "mxnet",
    "paddle": "paddle",
    "singa": "singa",
}

# --- samples/collectives.csv: one row per collective a rank of a data-parallel run entered (its DDP
# gradient buckets' all-reduce): when the rank arrived (ARRIVE_NS) and when the collective completed on it.
COLLECTIVES_TABLE = "collectives"
ARRIVE_NS = "arrive_ns"
DONE_NS = "done_ns"
COLLECTIVE = "collective"  # what it was: "allreduce" (a DDP bucket), "broadcast" ...
COLLECTIVE_COLUMNS = ("epoch", "step", COLLECTIVE, ARRIVE_NS, DONE_NS, RANK)

# --- samples/step_parts.csv: a PyTorch step of a user's command split where the probe sees it (tracer/probe/
# step_parts.py), one row per step of the steps table (same epoch, step, rank, start_ns): forward (batch handed out to
# backward() called), backward (inside backward(): DDP's gradient all-reduce too), optimizer (inside
# optimizer.step()), and ARRIVE_NS, when the step called backward(): where DDP's all-reduce begins.
STEP_PARTS_TABLE = "step_parts"
FORWARD_S, BACKWARD_S, OPTIMIZER_S = "forward_s", "backward_s", "optimizer_s"
STEP_PART_COLUMNS = ("epoch", "step", RANK, "start_ns", FORWARD_S, BACKWARD_S, OPTIMIZER_S, ARRIVE_NS)
#: The rendezvous of a data-parallel launch, as torchrun sets it (the runner sets it for `--nproc`).
MASTER_ADDR_ENV, MASTER_PORT_ENV = "MASTER_ADDR", "MASTER_PORT"
#: Under the run folder: rank r's own folder (events, steps, collectives, log) for every rank but 0, whose
#: files are the run's own; the tracer merges their tables into the run's with the RANK column.
RANKS_DIR = "ranks"


# --- CUPTI batch files written by the in-worker collector (raw/cupti/*)
#: CUpti_ActivityMemcpyKind values, named as nsys names them (`analyzers.tables.MEMCPY_KINDS` builds on these).
MEMCPY_NAMES = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
}
#: Columns of the CUPTI records the tracer decodes from the raw buffers (`raw/cupti/records-NNNNN.parquet`).
CUPTI_COLUMNS = ("kind", "name", "start_ns", "end_ns", "pid", "tid", "correlation_id", "device", "stream", "bytes")
#: What the collector writes under raw/cupti/: each completed CUPTI buffer's valid bytes as they are, an index
#: line per buffer ({"file", "valid_bytes", "stream", "dropped", "t_ns"}; "file" null when only drops were
#: reported), the start facts (CUPTI version, cbid -> name tables, clock), kernel names, the stop facts.
CUPTI_RAW_FORMAT = "dl-tracer-cupti-raw/1"
CUPTI_BUFFER_FILE = "buf-%05d.bin"
CUPTI_BUFFER_GLOB = "buf-*.bin"
CUPTI_INDEX_FILE = "index.jsonl"
CUPTI_META_FILE = "meta.json"
CUPTI_STOP_FILE = "stop.json"
CUPTI_KERNEL_NAMES_FILE = "kernel_names.json"
CUPTI_CLOCK_FILE = "clock.json"
CUPTI_LIBRARY_ENV = "TRACER_LIBCUPTI"  # a libcupti path that overrides the search (the worker and the probe)
#: The worker's own watchdog thread (tracer.worker.lifeline): the tool's, not training; thread tables leave it out.
LIFELINE_THREAD = "tracer-lifeline"
