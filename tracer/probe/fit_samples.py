"""The samples of each step of a framework's own fit loop (Keras, paddle.Model), read from what fit was
given, since its batch callbacks do not say: arrays and a batch size, or a tf.data set whose batch
dimension is not fixed (`.batch(32)` keeps its last, shorter batch, so its element spec says None).

`samples_of(x, batch, steps_per_epoch, validation_split)` gives a function of the step number: the batch
size, the last step of an epoch holding what remains where the epoch's sample count is known; None
(not counted) where no batch size can be read.
"""

_LIMIT = 64  # how far down a chain of datasets to look


def _scalar(value):  # type: (object) -> object
    try:
        return int(value.numpy() if hasattr(value, "numpy") else value)
    except Exception:  # noqa: BLE001 - a batch size that is not a number here
        return None


def _cardinality(ds):  # type: (object) -> object
    """A tf.data set's number of elements, or None where it is infinite or unknown."""
    try:
        n = _scalar(ds.cardinality())
    except Exception:  # noqa: BLE001
        return None
    return n if n is not None and n >= 0 else None


def tf_data_batches(ds):  # type: (object) -> tuple
    """(batch size, samples an epoch or None) of a tf.data set batched once in its chain."""
    outer = ds
    for _ in range(_LIMIT):
        size = getattr(ds, "_batch_size", None)
        if size is not None:
            batch = _scalar(size)
            if not batch:
                return None, None
            total = _cardinality(getattr(ds, "_input_dataset", None))
            drop = bool(_scalar(getattr(ds, "_drop_remainder", False)) or 0)
            if total is not None:
                total = total // batch * batch if drop else total
                steps = -(-total // batch)
                if _cardinality(outer) != steps:  # take/repeat/filter after the batch: the count is not this
                    total = None
            return batch, total
        ds = getattr(ds, "_input_dataset", None)
        if ds is None:
            break
    return None, None


def _length(x):  # type: (object) -> object
    for _ in range(4):  # a tuple, list or dict of arrays: the first array's length
        if isinstance(x, (list, tuple)) and x:
            x = x[0]
        elif isinstance(x, dict) and x:
            x = next(iter(x.values()))
        else:
            break
    shape = getattr(x, "shape", None)
    try:
        return int(shape[0]) if shape is not None and len(shape) > 0 else None
    except (TypeError, ValueError, IndexError):
        return None


def samples_of(x, batch, steps_per_epoch=None, validation_split=0.0):
    """The step number -> samples function of a fit given `x` and `batch` (see the module docstring)."""
    total = None
    if hasattr(x, "element_spec"):
        batch, total = tf_data_batches(x)
    elif "DataLoader" in type(x).__name__:  # paddle.Model.fit given a DataLoader: its own batches
        batch = _scalar(getattr(x, "batch_size", None))
    elif batch:
        total = _length(x)
        if total is None and hasattr(x, "__len__") and hasattr(x, "__getitem__"):  # a map-style dataset
            total = len(x)
        if total is not None and validation_split:
            total = int(total * (1.0 - float(validation_split)))  # Keras keeps the first part for training
    if steps_per_epoch:
        total = None  # an epoch of so many steps: full batches from a longer (or repeated) set
    if not batch:
        return lambda step: None

    def samples(step):  # type: (int) -> int
        if total is None:
            return batch
        return max(0, min(batch, total - step * batch))

    return samples
