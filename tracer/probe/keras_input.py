"""Keras `fit`'s wait for its batches (Keras 3 on TensorFlow), measured where it can be.

Keras reads a tf.data batch inside its compiled train function (`iterator.get_next()` in the graph),
where no Python runs per step. With one step per execution and a plain tf.data iterator, the probe
takes the batch with an eager `get_next()` (timed: that is the wait) and hands it to Keras's own train
function the way Keras itself feeds a Python iterator (`function([batch])` runs the same compiled
`one_step_on_data`): one eager op per step is the cost. Elsewhere (`steps_per_execution` > 1, a
`tf.distribute` iterator, Keras 2) the wait stays not measured (`Probe.IN_GRAPH_INPUT`).
"""

import importlib

from .recorder import perf


def patch(keras, recorder):
    """`Model.make_train_function` handing out the timed function (see the module's docstring)."""
    major = str(getattr(keras, "__version__", "0")).split(".", 1)[0]
    if not major.isdigit() or int(major) < 3 or keras.backend.backend() != "tensorflow":
        return
    tf = importlib.import_module("tensorflow")
    model_cls = keras.Model
    original = model_cls.make_train_function

    def make_train_function(self, force=False):
        original(self, force)
        made = self.train_function
        if made is not None and not getattr(made, "_dltracer_timed", False) and self.steps_per_execution == 1:
            self.train_function = _timed(made, tf, recorder)
        return self.train_function

    make_train_function.__wrapped__ = original
    model_cls.make_train_function = make_train_function


def _timed(made, tf, recorder):
    def function(iterator):
        if not recorder.suppress or type(iterator).__name__ != "OwnedIterator":  # only fit's own, recorded
            return made(iterator)
        t = perf()
        try:
            data = iterator.get_next()
        except tf.errors.OutOfRangeError:
            raise StopIteration from None
        recorder.fit_wait = perf() - t
        return made((data,))

    function._dltracer_timed = True
    function.__wrapped__ = made
    return function
