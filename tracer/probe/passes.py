"""A `Pass`: one iteration of an input pipeline, handed to the training loop in place of the
pipeline's iterator, and how its batches become steps.

A `Pass` is one iteration of an input pipeline (a DataLoader's `for`, a marker's `steps(...)`): each batch
it hands out is a step whose data wait is the time inside the pipeline's `next()` and whose compute is the
time until the loop asks for the next batch. A pass becomes an epoch at its first recorded step. Only one
pass records at a time: a pipeline iterated inside another (a marker around a DataLoader, an evaluation loop
inside a training epoch) passes through unrecorded. A pass may require training (`needs_training`: a torch
DataLoader): a step counts only when a backward or an optimizer step happened during it, so evaluation loops
are not epochs.

Training loops that are not a plain `for` (Lightning's, transformers' Trainer through accelerate) read
batches ahead (one, or all those of a gradient accumulation) and may never ask past the last batch. So,
for a pass that requires training:
- a batch handed out but not trained before the next one was asked for is carried into the next
  trained step (that step then holds several batches: one optimizer update under gradient
  accumulation), and a pass that reads ahead does not end at its StopIteration (the batches read ahead
  train after it);
- a pass ends when a new pass of the same pipeline begins, when a new pass begins after it handed out
  all its batches or while it is an evaluation (nothing trained since it began; it resumes if the new
  pass trains nothing), when it is dropped, or at exit;
- a pass ended outside a `next()` closes its last step at the last training mark (backward, optimizer
  step) after that batch was handed out, and its epoch ends where its last step ended.

An epoch is the pass's wall time, all of it: it begins when the pass begins (before the pipeline's
iterator is made, so a loader's start-up is the first step's wait) and, for a pass that ends at its
StopIteration, ends when that returns (the pipeline's tail: a DataLoader's workers shut down); its steps
and a "between steps" remainder add up to it (`analyzers.figures.steps`).
"""

import sys

from .recorder import perf, wall_ns

_STOPPED = object()
"""What `next()` of a pass's pipeline gave where it raised StopIteration."""


def _caller_package():  # type: () -> str
    """The top package of the code that called the pass's `next()` (two frames up)."""
    try:
        return sys._getframe(2).f_globals.get("__name__", "").split(".", 1)[0]
    except ValueError:
        return ""


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


def pipeline_length(pipeline):  # type: (object) -> object
    """How many batches one pass over `pipeline` hands out, or None where it cannot say."""
    try:
        return int(len(pipeline))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - an iterable dataset, a generator: no length
        return None


class Pass(object):
    """One iteration of an input pipeline, handed to the user in place of the pipeline's iterator."""

    __slots__ = (
        "_it",
        "_rec",
        "source",
        "needs_training",
        "pipeline",
        "length",
        "recording",
        "draining",
        "handed",
        "counted",
        "marks_at_begin",
        "_ready",
        "_begin",
        "_start_ns",
        "_wait",
        "_n",
        "_marks",
        "_carry",
        "reads_ahead",
        "ahead",
        "_stop",
        "epoch_no",
        "releases",
    )

    def __init__(self, recorder, probe, needs_training, pipeline=None, releases=False):
        """Claims the recording first, then `attach` gives the iterator: a pipeline iterated while
        it is made (a DataLoader inside a marker) finds the claim taken."""
        self._it = None  # type: object
        self._rec = recorder
        self.source = probe
        self.needs_training = needs_training
        self.pipeline = pipeline  # the object iterated: a second pass over it ends this one
        self.length = pipeline_length(pipeline) if pipeline is not None else None
        self.draining = False  # past its StopIteration, the batch read ahead still training
        self.handed = 0  # batches handed out
        self.counted = 0  # steps recorded
        self.marks_at_begin = recorder.train_marks
        # drops the pipeline's iterator at its StopIteration (tf.data's: its teardown joins the pipeline's
        # threads, up to 1.2 s on a busy machine), so that the teardown is the epoch's
        self.releases = releases
        self._ready = None  # type: object
        self._start_ns = 0
        self._wait = 0.0
        self._n = 0
        self._marks = 0
        self._carry = None  # type: object  # (start_ns, wait, images) of batches handed out but not yet trained
        self.reads_ahead = False  # a batch was carried into a trained step: the loop takes batches ahead
        self.ahead = None  # type: object  # iterated by accelerate, which takes one batch ahead (see _close_step)
        self._stop = None  # type: object  # (training marks, wall ns) at a draining pass's StopIteration
        self.recording = recorder.begin_pass(self)
        self.epoch_no = recorder.epoch + 1  # the epoch it will be, where it trains (the trace window's edges)
        if self.recording:
            recorder.boundary(self.epoch_no, 0)
        # The pass began before its iterator was made: a loader's start-up (workers spawned again each
        # epoch without persistent_workers) is its first step's wait for data.
        self._begin = (perf(), wall_ns())  # type: object

    def attach(self, iterator):
        self._it = iterator
        return self

    def __iter__(self):
        return self

    def __del__(self):  # type: () -> None
        """A loop left with `break` drops its iterator: the epoch ends with its last trained step."""
        try:
            self.finish()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass

    def __len__(self):  # type: () -> int
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)

    def __next__(self):
        if not self.recording or self.draining:
            return next(self._it)
        if self._begin is not None:
            (t, now_ns), self._begin = self._begin, None
            ended = t
        else:
            t, now_ns = perf(), wall_ns()
            ended = t  # the step before this one ends here, whatever the trace window does next
            if self._rec.torch_window is not None and self._rec.boundary(self.epoch_no, self.handed):
                t, now_ns = perf(), wall_ns()
        if self.ahead is None:
            self.ahead = _caller_package() == "accelerate"
        try:
            batch = next(self._it)
        except StopIteration:
            if self.needs_training and self.counted and (self.reads_ahead or self._carry):
                self.draining = True  # read one ahead: its last batch trains after this
                self._stop = (self._rec.train_marks, now_ns)
                raise
            batch = _STOPPED
        if batch is _STOPPED:  # outside the except clause, whose traceback holds the pipeline's iterator
            if self._ready is not None:
                self._close_step(ended - self._ready)
            self._ready = None
            self.recording = False
            if self.releases:
                self._it = iter(())  # dropped here: its teardown is the epoch's, not the loop's next line's
            self._rec.end_pass(self, wall_ns())  # the pipeline's tail (its workers shut down) is the epoch's
            self._rec.stop_if_diverged()
            raise StopIteration
        ready = perf()
        if self._ready is not None:
            self._close_step(ended - self._ready)
        self._start_ns, self._wait, self._n = now_ns, ready - t, batch_size(batch)
        self._marks = self._rec.train_marks
        self._ready = ready
        self.handed += 1
        return batch

    next = __next__  # Python 2 spelling some libraries still call

    def _close_step(self, compute_s, shift=True):  # type: (float, bool) -> None
        """The step of the batch handed out last, `compute_s` after it was ready."""
        rec = self._rec
        trained = not self.needs_training or rec.train_marks != self._marks
        start_ns, wait, n = self._start_ns, self._wait, self._n
        if not trained:  # read ahead, or gathered for gradient accumulation: carried into the next trained step
            carried = self._carry or (start_ns, 0.0, 0)
            self._carry = (carried[0], carried[1] + wait, carried[2] + n)
            return
        if self._carry and self.ahead and shift:
            # accelerate took this batch ahead: the training just seen was the carried batches' (one
            # step each update); this batch is carried into the next, from where this step ended
            end_ns = start_ns + int((wait + compute_s) * 1e9)
            (c_start, c_wait, c_n), self._carry = self._carry, (end_ns, 0.0, n)
            self.reads_ahead = True
            rec.take_step(self.source, c_start, c_wait, (end_ns - c_start) / 1e9 - c_wait, c_n)
            self.counted += 1
            return
        if self._carry:
            start_ns, wait, n = self._carry[0], wait + self._carry[1], n + self._carry[2]
            self._carry, self.reads_ahead = None, True
        rec.take_step(self.source, start_ns, wait, compute_s, n)
        self.counted += 1

    def finish(self):  # type: () -> None
        """Ends this pass outside a `next()`: its last batch, trained since it was handed out, is a
        step ending at the last training mark; a last batch not trained is left out."""
        if not self.recording:
            return
        rec = self._rec
        if self._ready is not None and self.needs_training and rec.train_marks != self._marks:
            stop = self._stop
            if self.ahead and self._carry and stop is not None and stop[0] != self._marks:
                # the carried batches trained before the loader said it was done (a step ending there),
                # the last batch after it (a step of its own)
                (c_start, c_wait, c_n), self._carry = self._carry, None
                rec.take_step(self.source, c_start, c_wait, (stop[1] - c_start) / 1e9 - c_wait, c_n)
                last_ns = wall_ns() - int((perf() - rec.last_mark) * 1e9)
                rec.take_step(self.source, stop[1], 0.0, max(0.0, (last_ns - stop[1]) / 1e9), self._n)
                self.counted += 2
            else:
                self._close_step(max(0.0, rec.last_mark - self._ready), False)
        self._ready = None
        self.recording = False
        rec.end_pass(self, None, True)

    def superseded_by(self, other):  # type: (Pass) -> str
        """What a new pass `other` does to this recording one: 'end' it, 'suspend' it, or '' (nested)."""
        if self.pipeline is not None and other.pipeline is self.pipeline:
            return "end"  # a new iteration of the same pipeline: this one is over
        if not self.needs_training:
            return ""
        if self.draining or (self.length is not None and self.handed >= self.length):
            return "end"  # every batch handed out: what follows is the loop's epoch end
        if self.counted == 0 and self.handed and self._rec.train_marks == self.marks_at_begin:
            return "suspend"  # nothing trained since it began: an evaluation (Lightning's sanity check)
        return ""
