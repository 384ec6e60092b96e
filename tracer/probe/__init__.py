"""dl-tracer's probe: what `tracer profile -- COMMAND` puts into every Python process of the command
(through PYTHONPATH and a `sitecustomize` that chains the user's own), to time training steps with no
change to the script. Apart from the tool like the worker: Python 3.6, standard library only.

In a command's processes this package is importable as `dltracer_probe`; its one public name is the
marker for loops no hook recognises::

    try:
        from dltracer_probe import steps
    except ImportError:  # not under the tracer: the loop runs as it is
        def steps(batches):
            return batches

    for epoch in range(3):
        for batch in steps(loader):  # each call is an epoch, each batch a step
            train_step(batch)

Outside the tracer (no run folder in the environment) `steps` hands the iterable back unchanged.
"""

from .marker import steps

__all__ = ["steps"]
