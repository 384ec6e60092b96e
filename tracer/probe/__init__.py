"""dl-tracer's probe: what `tracer profile -- COMMAND` puts into every Python process of the command
(through PYTHONPATH and a `sitecustomize` that chains the user's own), to time training steps with no
change to the script. Apart from the tool like the worker: Python 3.6, standard library only.

In a command's processes this package is importable as `dltracer_probe`; its one public name is the
marker for loops no hook recognises::

    try:
        from dltracer_probe import timed_epoch
    except ImportError:  # not under the tracer: the loop runs as it is
        def timed_epoch(batches):
            return batches

    for epoch in range(3):
        for batch in timed_epoch(loader):  # each call is an epoch, each batch a step
            train_step(batch)

Outside the tracer (no run folder in the environment) `timed_epoch` hands the iterable back unchanged.
`steps` is its first name, kept for the scripts that use it.
"""

from .marker import steps, timed_epoch

__all__ = ["steps", "timed_epoch"]
