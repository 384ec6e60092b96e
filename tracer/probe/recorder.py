"""What the probe records in one process: steps (wait for the batch, rest of the step), epochs, loss.

How a pass over a pipeline becomes steps and epochs, and when it ends: `passes.py`.

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

from . import device
from .names import schema

FLUSH_ROWS = 256
PROGRESS_EVERY_S = 0.5
perf = time.perf_counter


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
        self.last_mark = 0.0  # perf() at the last backward or optimizer step
        self.step_end_ns = 0  # where the last recorded step ended (wall clock)
        self.pending_end = None  # type: object  # an epoch left early: complete if another follows (see end_epoch)
        self.last_steps = None  # type: object  # steps of the last complete epoch
        self.first_mark = None  # type: object  # (perf, wall ns) of the first backward or optimizer step
        # An asynchronous framework's steps (device.py): the watcher of its calls, the last call's number,
        # steps and epoch ends waiting for their calls' outputs, where the device's work last ended.
        self.watcher = None  # type: object
        self.fit_wait = None  # type: object  # Keras fit's wait for the step's batch (keras_input.py)
        self.last_call = 0
        self._fifo = []  # type: list
        self.device_end_ns = 0
        self.suspended = None  # type: object  # an evaluation pass a new pass interrupted
        self.seen_pass = False
        self.steps_taken = 0  # steps the passes took, all of them (the JAX FLOP counter's clock)
        self.step_hook = None  # type: object  # called after each (flops_jax.JaxStepCounter.step_ended)
        self._rows = []  # type: list
        self._steps_file = None  # type: object
        self._events_file = None  # type: object
        self._last_progress = 0.0
        self._lock = threading.Lock()
        self.frameworks = {}  # type: dict
        self.torch_window = None  # type: object  # `--trace torch`: the profiler's gate (torch_window.py)
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
                    self._steps_file.write(schema.STEP_HEADER)
            self._steps_file.write("".join(self._rows))
            self._steps_file.flush()
        except (OSError, ValueError):
            pass
        self._rows = []

    def after_fork(self):  # type: () -> None
        """In a forked child (a DataLoader worker): nothing of the parent's is ours to write."""
        self.pid = os.getpid()
        self._rows, self._steps_file, self._events_file, self.active = [], None, None, None
        self.epoch_open, self.watcher, self._fifo = False, None, []
        self.torch_window = None

    def boundary(self, epoch, step):  # type: (int, int) -> bool
        """Step `step` of epoch `epoch` is about to begin (the trace window's edges are here); True where
        tracing started or stopped, which took time that is no step's."""
        window = self.torch_window
        if window is None or os.getpid() != self.pid:
            return False
        try:
            return bool(window.boundary(epoch, step))
        except Exception as e:  # noqa: BLE001 - the trace is lost, never the training
            self.torch_window = None
            self.emit(schema.Event.TRACE_ERROR, error="--trace torch: %s: %s" % (type(e).__name__, e))
            return False

    # --- passes and steps
    def begin_pass(self, p):  # type: (Pass) -> bool
        """Whether `p` records: not while another pass records (unless `p` supersedes it, see
        `Pass.superseded_by`), nor inside a framework's own loop."""
        if self.suppress or os.getpid() != self.pid:
            return False
        self.settle(False)
        active = self.active
        if active is not None and getattr(active, "recording", False):
            verdict = active.superseded_by(p)
            if verdict == "end":
                active.finish()
            elif verdict == "suspend":
                active.recording = False
                self.suspended = active
            else:
                return False
        self.active = p
        self.seen_pass = True
        return True

    def mark_training(self):  # type: () -> None
        """A backward or an optimizer step: the step under way trains."""
        if self.first_mark is None and not self.seen_pass:  # optimizer-counted steps: the first begins here
            self.boundary(1, 0)
        self.train_marks += 1
        self.last_mark = perf()
        if self.first_mark is None:
            self.first_mark = (self.last_mark, wall_ns())

    def dispatched(self, number):  # type: (int) -> None
        """A watched call (device.py) was made in the step under way."""
        self.last_call = number

    def take_step(self, probe, start_ns, wait_s, compute_s, n):
        """A pass's step as the host saw it; where its calls' work may still run (a watcher exists), it
        waits in order for their outputs (`settle`)."""
        self.steps_taken += 1
        if self.step_hook is not None:
            self.step_hook()
        if self.watcher is None:
            self.add_step(probe, start_ns, wait_s, compute_s, n)
            return
        self._fifo.append((probe, start_ns, wait_s, compute_s, n, self.last_call))
        self.settle(False)

    def settle(self, final):  # type: (bool) -> None
        """The waiting steps whose outputs are ready, in order: a step ends when the later of its host
        work and its outputs is done, and begins where the one before it ended; its wait for data is
        what of the host's wait lies after that (the device had nothing else to do). `final` (at
        exit): the watcher is given a while to catch up, then a step not seen done ends on the host."""
        watcher = self.watcher
        if watcher is None or not self._fifo:
            return
        if final:
            watcher.wait(watcher.dispatched, device.EXIT_WAIT_S)
        while self._fifo:
            item = self._fifo[0]
            if item[0] is None:  # a pass's end: its epoch ends when its last step's work did
                _, end_ns, early = item
                self._fifo.pop(0)
                if self.epoch_open:
                    self.end_epoch(self.read_loss(), max(end_ns or 0, self.device_end_ns) or None, early)
                continue
            probe, start_ns, wait_s, compute_s, n, call = item
            ready = watcher.ready_ns(call) if call else 0
            if ready is None and not final:
                return
            self._fifo.pop(0)
            host_end = start_ns + int(((wait_s or 0.0) + compute_s) * 1e9)
            start = max(start_ns, self.device_end_ns)
            end = max(host_end, ready or 0, start)
            wait = None if wait_s is None else max(0, min(start_ns + int(wait_s * 1e9), end) - start) / 1e9
            self.add_step(probe, start, wait, (end - start) / 1e9 - (wait or 0.0), n)
            self.device_end_ns = end
            if call > 1:
                watcher.forget(call - 1)

    def add_step(self, probe, start_ns, wait_s, compute_s, n):
        """One step; `wait_s` None where the wait for its batch was not seen, `n` None where its samples
        were not counted."""
        if not self.epoch_open:
            self.begin_epoch(start_ns)
        self.suspended = None  # a pass that trains: the evaluation it interrupted will not
        self._rows.append(schema.step_row(self.epoch, self.step, n, start_ns, wait_s, compute_s, 0.0, self.rank, probe))
        self.step += 1
        self.images += n or 0
        self.step_end_ns = start_ns + int(((wait_s or 0.0) + compute_s) * 1e9)
        if len(self._rows) >= FLUSH_ROWS:
            self._flush_rows()
        now = perf()
        if self.rank == 0 and now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            self.emit(schema.Event.PROGRESS, epoch=self.epoch, images=self.images, loss=None)

    def begin_epoch(self, start_ns):  # type: (int) -> None
        """An epoch begins where its pass began (its loader's start-up is the epoch's, and its first step's wait)."""
        self._emit_pending(False)  # an epoch left early and followed by another: left on purpose, complete
        self.epoch += 1
        self.step, self.images, self.epoch_open = 0, 0, True
        if self.rank == 0:  # the epoch began when its first batch was asked for
            self.emit(schema.Event.EPOCH_START, epoch=self.epoch, images_total=0, **{schema.T_NS: start_ns})

    def end_pass(self, p, end_ns=None, early=False):  # type: (Pass, object, bool) -> None
        """`p` is over: its epoch ends at `end_ns` (the pass's own end: a loader's shutdown is the epoch's),
        else with its last step; `early`: left before its last batch (see end_epoch)."""
        if self.active is p:
            self.active = None
            if self._fifo:  # its last steps still wait for their work: the epoch ends after them
                self._fifo.append((None, end_ns, early))
                self.settle(False)
            elif self.epoch_open:
                if end_ns is not None and self.device_end_ns:
                    end_ns = max(end_ns, self.device_end_ns)
                self.end_epoch(self.read_loss(), end_ns, early)
            elif self.suspended is not None:  # an evaluation that interrupted nothing trained: resume it
                self.active, self.suspended = self.suspended, None
                self.active.recording = True

    def read_loss(self):  # type: () -> object
        """The epoch's last loss where it costs nothing more than one read at the epoch's end."""
        reader, self.loss_reader = self.loss_reader, None
        if reader is None:
            return None
        try:
            return float(reader())
        except Exception:  # noqa: BLE001 - no loss is better than a failed training
            return None

    def end_epoch(self, loss, end_ns=None, early=False, partial=False):
        # type: (object, object, bool, bool) -> None
        """The epoch ends at `end_ns`, else where its last step ended. One left `early` (a pass dropped
        before its last batch, an epoch still open at exit) is held: complete if another epoch follows
        (a loop that stops each epoch on purpose), else decided at exit (`close`). A `partial` epoch
        (interrupted: a framework's loop raised inside it) is marked so; every epoch figure leaves it out."""
        self.epoch_open = False
        self._flush_rows()
        event = {"epoch": self.epoch, "images": self.images, "loss": loss, "steps": self.step}
        event[schema.T_NS] = end_ns or self.step_end_ns or wall_ns()
        if early or partial:
            self.pending_end = (event, partial)
        else:
            self._emit_end(event, False)
        if self.torch_window is not None and os.getpid() == self.pid:  # after the epoch's end: its cost is no epoch's
            self.torch_window.epoch_ended(self.epoch, self.step)

    def _emit_pending(self, at_exit):  # type: (bool) -> None
        pending, self.pending_end = self.pending_end, None
        if pending is not None:
            event, partial = pending
            shorter = self.last_steps is not None and event["steps"] < self.last_steps
            self._emit_end(event, partial or (at_exit and (shorter or self.failed())))

    @staticmethod
    def failed():  # type: () -> bool
        """Whether the process is ending on an uncaught exception (Ctrl-C's KeyboardInterrupt included)."""
        return getattr(sys, "last_type", None) is not None or getattr(sys, "last_exc", None) is not None

    def _emit_end(self, event, partial):  # type: (dict, bool) -> None
        loss = event["loss"]
        if partial:
            event[schema.PARTIAL] = True
        else:
            self.last_steps = event["steps"]
        if self.rank == 0:  # the epoch ended where its pass ended (not later, where a loop noticed it)
            self.emit(schema.Event.EPOCH_END, **event)
        if isinstance(loss, float) and not math.isfinite(loss) and not self.diverged:
            self.diverged = True
            self.emit(
                schema.Event.DIVERGED,
                epoch=event["epoch"],
                step=None,
                images=event["images"],
                loss=schema.nonfinite_name(loss),
                last_finite_loss=self.last_finite_loss,
                lr=None,
                continued=False,
            )
        elif isinstance(loss, float):
            self.last_finite_loss = loss

    def optimizer_step(self, probe, n=None, began=None):  # type: (str, object, object) -> None
        """A step counted by the optimizer (no pipeline iteration seen): from the previous update, the
        first from the first training mark (backward), else from when its update `began` (its forward
        is not seen); `n` samples where the update says."""
        start = self.optimizer_last or self.first_mark or began
        self.mark_training()
        if self.seen_pass or self.suppress:
            return
        now, now_ns = perf(), wall_ns()
        if start is not None:
            last, last_ns = start
            self.add_step(probe, last_ns, None, now - last, n)
            if self.boundary(self.epoch, self.step):  # the next step begins after the profiler started or stopped
                now, now_ns = perf(), wall_ns()
        self.optimizer_last = (now, now_ns)

    def close(self):  # type: () -> None
        """At exit: an epoch still open (a loop left with `break`, optimizer-counted steps) ends here;
        one left early is partial where the process fails, or where it holds fewer steps than the epoch
        before it."""
        if os.getpid() != self.pid:
            return
        active = self.active
        if active is not None and getattr(active, "recording", False):
            active.finish()
        self.settle(True)
        if self.epoch_open:
            self.end_epoch(self.read_loss(), None, True)
        self._emit_pending(True)
        self._flush_rows()
        if self.torch_window is not None:
            self.torch_window.close()
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
