"""The names the worker writes and the tracer reads: event kinds, file names, CUPTI record columns.

Worker side (Python 3.6, standard library only). The rest of the tool reaches these names through
`tracer.core.schema`, the one module allowed to import this one, so worker and tracer cannot drift.
"""

from typing import Any, Dict

# --- events.jsonl: one JSON object per line, {"kind": ..., "t_ns": ..., fields}
EVENTS_FILE = "events.jsonl"
WORKER_CONFIG_FILE = "worker_config.json"
WORKER_PID_FILE = "worker.pid"
KIND = "kind"  # the key that names an event's kind
T_NS = "t_ns"  # the key of an event's Unix-epoch time in ns


class Event(object):
    """Event kinds, in the order a run emits them."""

    START = "start"  # the worker is up: pid, python
    DATASET = "dataset"  # images in the folder and used, classes
    VERSIONS = "versions"  # framework and package versions
    PHASE = "phase"  # a named phase begins (build, compile ...)
    MODEL = "model"  # parameter counts and the knobs as the framework applied them
    EPOCH_START = "epoch_start"
    PROGRESS = "progress"  # at most every half second: images so far, last loss
    EPOCH_END = "epoch_end"  # images, loss
    END = "end"  # the worker finished every epoch
    ERROR = "error"  # the framework's own cause, and the stage it failed in
    TRACE_ERROR = "trace_error"  # a tracer inside the worker failed; training went on
    TRACE_OVERHEAD = "trace_overhead"  # what an in-worker tracer recorded and what it cost
    COMPILE = "compile"  # a JIT compilation (JAX): state start/end, function, batch_shape, seconds on end
    DIVERGED = "diverged"  # the first non-finite loss: epoch, step, images, loss, last_finite_loss, lr, continued
    DECODE = "decode"  # --data memory: the set decoded into host memory, state start/end (end: images, bytes, seconds)
    TRACE_WINDOW = "trace_window"  # the trace window's edge: edge "open" (tracing began) or "close" (about to stop)

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
    )


#: A `trace_window` event's field WINDOW_EDGE: WINDOW_OPEN once tracing runs, WINDOW_CLOSE just before it stops.
WINDOW_EDGE = "edge"
WINDOW_OPEN = "open"
WINDOW_CLOSE = "close"
#: TRACER_TRACE's value when nsys traces a window: the worker then opens the NVTX range below around it.
NSYS_WINDOW_TRACE = "nsys-window"
#: The NVTX range the worker opens around its trace window; nsys's capture range (`--nvtx-capture`) starts on it.
NVTX_WINDOW_RANGE = "dl-tracer trace window"

#: What the worker does at the first non-finite loss (--on-divergence): stop (the run ends `diverged`),
#: or continue training, the run still marked `diverged`.
ON_DIVERGENCE = ("stop", "continue")
EXIT_DIVERGED = 5  # the worker's exit code when it stopped at a divergence (its `diverged` event says where)


#: Where the batches come from (--data): files (each framework's pipeline from the JPEGs), memory (decoded
#: once before the first epoch, batched from RAM), synthetic (one random batch made once on the device).
DATA_MODES = ("files", "memory", "synthetic")
DATA_FILES, DATA_MEMORY, DATA_SYNTHETIC = DATA_MODES


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
STEP_COLUMNS = ("epoch", "step", "images", "start_ns", DATA_WAIT_S, COMPUTE_S, SYNC_S)


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
#: Columns of a CUPTI batch file, one list each; `name` holds indexes into the batch's `names`.
CUPTI_COLUMNS = ("kind", "name", "start_ns", "end_ns", "pid", "tid", "correlation_id", "device", "stream", "bytes")
#: The worker's own watchdog thread (tracer.worker.lifeline): the tool's, not training; thread tables leave it out.
LIFELINE_THREAD = "tracer-lifeline"
