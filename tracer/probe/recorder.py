"""What the probe records in one process: steps (wait for the batch, rest of the step), epochs, loss.

One `Recorder` per process. A `Pass` is one iteration of an input pipeline (a DataLoader's `for`, a
marker's `steps(...)`): each batch it hands out is a step whose data wait is the time inside the
pipeline's `next()` and whose compute is the time until the loop asks for the next batch. A pass
becomes an epoch at its first recorded step. Only one pass records at a time: a pipeline iterated
inside another (a marker around a DataLoader, an evaluation loop inside a training epoch) passes
through unrecorded. A pass may require training (`needs_training`: a torch DataLoader): a step counts
only when a backward or an optimizer step happened during it, so evaluation loops are not epochs.

Rows go to samples/steps-<pid>.csv in batches (every FLUSH_ROWS rows, each epoch's end and exit);
events (rank 0's epochs and progress, every rank's divergence) to events.jsonl, one whole line per write.
"""

import atexit
import json
import math
import os
import sys
import threading
import time

from .names import schema

FLUSH_ROWS = 256
PROGRESS_EVERY_S = 0.5
_perf = time.perf_counter


def _wall_ns_from_float():  # type: () -> int
    return int(time.time() * 1e9)


wall_ns = getattr(time, "time_ns", _wall_ns_from_float)  # Python 3.7+, the float clock before


def _int_env(*names):  # type: (*str) -> int
    for name in names:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return 0


def batch_size(batch):  # type: (object) -> int
    """The leading dimension of a batch's first array (a tuple, list or dict of them), else 1."""
    x = batch
    for _ in range(4):
        if isinstance(x, (list, tuple)) and x:
            x = x[0]
        elif isinstance(x, dict) and x:
            x = next(iter(x.values()))
        else:
            break
    shape = getattr(x, "shape", None)
    if shape is not None:
        try:
            return int(shape[0]) if len(shape) > 0 else 1
        except (TypeError, ValueError, IndexError):  # an unknown leading dimension
            return 1
    return len(x) if hasattr(x, "__len__") else 1


class Pass(object):
    """One iteration of an input pipeline, handed to the user in place of the pipeline's iterator."""

    __slots__ = ("_it", "_rec", "source", "needs_training", "recording", "_ready", "_start_ns", "_wait", "_n", "_marks")

    def __init__(self, recorder, probe, needs_training):
        """Claims the recording first, then `attach` gives the iterator: a pipeline iterated while
        it is made (a DataLoader inside a marker) finds the claim taken."""
        self._it = None  # type: object
        self._rec = recorder
        self.source = probe
        self.needs_training = needs_training
        self.recording = recorder.begin_pass(self)
        self._ready = None  # type: object
        self._start_ns = 0
        self._wait = 0.0
        self._n = 0
        self._marks = 0

    def attach(self, iterator):
        self._it = iterator
        return self

    def __iter__(self):
        return self

    def __del__(self):  # type: () -> None
        """A loop left with `break` drops its iterator: the epoch ends at its last whole step."""
        try:
            if self.recording:
                self.recording = False
                self._rec.end_pass(self)
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass

    def __len__(self):  # type: () -> int
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)

    def __next__(self):
        if not self.recording:
            return next(self._it)
        t = _perf()
        now_ns = wall_ns()
        if self._ready is not None:
            self._rec.step_done(self, self._start_ns, self._wait, t - self._ready, self._n, self._marks)
        try:
            batch = next(self._it)
        except StopIteration:
            self._ready = None
            self.recording = False
            self._rec.end_pass(self)
            self._rec.stop_if_diverged()
            raise
        ready = _perf()
        self._start_ns, self._wait, self._n = now_ns, ready - t, batch_size(batch)
        self._marks = self._rec.train_marks
        self._ready = ready
        return batch

    next = __next__  # Python 2 spelling some libraries still call


class Recorder(object):
    """The probe's state in one process (see the module's docstring)."""

    def __init__(self, run_dir):  # type: (str) -> None
        self.run_dir = run_dir
        self.pid = os.getpid()
        self.rank = _int_env(schema.RANK_ENV, schema.LOCAL_RANK_ENV)
        self.world_size = max(1, _int_env(schema.WORLD_SIZE_ENV) or 1)
        self.train_marks = 0  # backward() and optimizer steps so far (torch)
        self.active = None  # type: object
        self.epoch = 0
        self.step = 0
        self.images = 0
        self.epoch_open = False
        self.last_loss = None  # type: object
        self.last_finite_loss = None  # type: object
        self.loss_reader = None  # type: object
        self.diverged = False
        self.suppress = 0  # >0 inside a framework's own loop (Keras fit): nested pipelines are its own
        self.optimizer_last = None  # type: object
        self.seen_pass = False
        self._rows = []  # type: list
        self._steps_file = None  # type: object
        self._events_file = None  # type: object
        self._last_progress = 0.0
        self._lock = threading.Lock()
        self.frameworks = {}  # type: dict
        atexit.register(self.close)

    # --- files
    def emit(self, kind, **fields):
        if os.getpid() != self.pid:
            return
        record = {schema.KIND: kind, schema.T_NS: wall_ns(), "pid": self.pid, schema.RANK: self.rank}
        record.update(fields)
        line = json.dumps(schema.strict_json(record), allow_nan=False) + "\n"
        try:
            if self._events_file is None:
                self._events_file = open(os.path.join(self.run_dir, schema.EVENTS_FILE), "a")
            self._events_file.write(line)
            self._events_file.flush()
        except (OSError, ValueError):
            pass

    def _flush_rows(self):  # type: () -> None
        if not self._rows or os.getpid() != self.pid:
            return
        try:
            if self._steps_file is None:
                folder = os.path.join(self.run_dir, schema.SAMPLES_DIR)
                name = "%s%s%d.csv" % (schema.STEPS_TABLE, schema.PROBE_STEPS_SEPARATOR, self.pid)
                self._steps_file = open(os.path.join(folder, name), "a")
                if self._steps_file.tell() == 0:
                    self._steps_file.write(",".join(schema.STEP_COLUMNS) + "\n")
            self._steps_file.write("".join(self._rows))
            self._steps_file.flush()
        except (OSError, ValueError):
            pass
        self._rows = []

    def after_fork(self):  # type: () -> None
        """In a forked child (a DataLoader worker): nothing of the parent's is ours to write."""
        self.pid = os.getpid()
        self._rows, self._steps_file, self._events_file, self.active = [], None, None, None
        self.epoch_open = False

    # --- passes and steps
    def begin_pass(self, p):  # type: (Pass) -> bool
        """Whether `p` records: not while another pass records, nor inside a framework's own loop."""
        if self.suppress or os.getpid() != self.pid:
            return False
        if self.active is not None and getattr(self.active, "recording", False):
            return False
        self.active = p
        self.seen_pass = True
        return True

    def step_done(self, p, start_ns, wait_s, compute_s, n, marks_before):
        if p.needs_training and self.train_marks == marks_before:
            return  # no backward nor optimizer step: evaluation, not training
        self.add_step(p.source, start_ns, wait_s, compute_s, n)

    def add_step(self, probe, start_ns, wait_s, compute_s, n):
        if not self.epoch_open:
            self.begin_epoch(start_ns)
        wait = "" if wait_s is None else "%.9f" % wait_s
        self._rows.append(
            "%d,%d,%d,%d,%s,%.9f,0,%d,%s\n" % (self.epoch, self.step, n, start_ns, wait, compute_s, self.rank, probe)
        )
        self.step += 1
        self.images += n
        if len(self._rows) >= FLUSH_ROWS:
            self._flush_rows()
        now = _perf()
        if self.rank == 0 and now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            self.emit(schema.Event.PROGRESS, epoch=self.epoch, images=self.images, loss=None)

    def begin_epoch(self, start_ns):  # type: (int) -> None
        self.epoch += 1
        self.step, self.images, self.epoch_open = 0, 0, True
        if self.rank == 0:  # the epoch began when its first batch was asked for
            self.emit(schema.Event.EPOCH_START, epoch=self.epoch, images_total=0, **{schema.T_NS: start_ns})

    def end_pass(self, p):  # type: (Pass) -> None
        if self.active is p:
            self.active = None
            if self.epoch_open:
                self.end_epoch(self.read_loss())

    def read_loss(self):  # type: () -> object
        """The epoch's last loss where it costs nothing more than one read at the epoch's end."""
        reader, self.loss_reader = self.loss_reader, None
        if reader is None:
            return None
        try:
            return float(reader())
        except Exception:  # noqa: BLE001 - no loss is better than a failed training
            return None

    def end_epoch(self, loss):  # type: (object) -> None
        self.epoch_open = False
        self._flush_rows()
        if self.rank == 0:
            self.emit(schema.Event.EPOCH_END, epoch=self.epoch, images=self.images, loss=loss, steps=self.step)
        if isinstance(loss, float) and not math.isfinite(loss) and not self.diverged:
            self.diverged = True
            self.emit(
                schema.Event.DIVERGED,
                epoch=self.epoch,
                step=None,
                images=self.images,
                loss=schema.nonfinite_name(loss),
                last_finite_loss=self.last_finite_loss,
                lr=None,
                continued=False,
            )
        elif isinstance(loss, float):
            self.last_finite_loss = loss

    def optimizer_step(self, probe):  # type: (str) -> None
        """A step counted by the optimizer (no pipeline iteration seen): time from the previous one."""
        self.train_marks += 1
        if self.seen_pass or self.suppress:
            return
        now, now_ns = _perf(), wall_ns()
        if self.optimizer_last is not None:
            last, last_ns = self.optimizer_last
            self.add_step(probe, last_ns, None, now - last, 0)
        self.optimizer_last = (now, now_ns)

    def close(self):  # type: () -> None
        """At exit: an epoch still open (a loop left with `break`, optimizer-counted steps) ends here."""
        if os.getpid() != self.pid:
            return
        if self.epoch_open:
            self.end_epoch(self.read_loss())
        self._flush_rows()
        for f in (self._steps_file, self._events_file):
            try:
                if f is not None:
                    f.close()
            except (OSError, ValueError):
                pass
        self._steps_file = self._events_file = None

    def stop_if_diverged(self):  # type: () -> None
        """A NaN loss at an epoch's end ends the script as a diverged worker does (after its files are written)."""
        if self.diverged:
            self.close()
            sys.stderr.flush()
            raise SystemExit(schema.EXIT_DIVERGED)
