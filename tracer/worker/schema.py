"""The names the worker writes and the tracer reads: event kinds, file names, CUPTI record columns.

Worker side (Python 3.6, standard library only). The rest of the tool reaches these names through
`tracer.core.schema`, the one module allowed to import this one, so worker and tracer cannot drift.
"""

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
    )


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
