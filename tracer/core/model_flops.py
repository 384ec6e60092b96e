"""The built-in models' training FLOPs (`tracer.worker.model_flops`, the worker's one description of their
layers), for the tool: the only door into that module, so tool and worker count from the same layers."""

from tracer.worker.model_flops import COUNTED, MODELS, Layer, ModelFlops, layers, model_flops

__all__ = ["COUNTED", "MODELS", "Layer", "ModelFlops", "layers", "model_flops"]
