"""TensorFlow's models: keras.applications' MobileNetV2, ResNet50 and VGG16's convolutional base, and the
layers Keras lacks, all sized as torchvision's.

Keras has no AlexNet, and its VGG16 head is sized for 224 px (Flatten of 7x7x512); both are defined here
to match torchvision, including torchvision's adaptive average pooling, so that the parameter count does
not depend on the image size. The trainer (tracer/worker/frameworks/tensorflow.py) sets TensorFlow's
environment before it imports this module.
"""

from typing import Any

import numpy as np
import tensorflow as tf

from tracer.worker.models import ParamCount
from tracer.worker.workload import adaptive_pool_matrix

keras = tf.keras


class AdaptiveAveragePooling2D(tf.keras.layers.Layer):
    """torch.nn.AdaptiveAvgPool2d for channels-last input: separable, so two constant matrices suffice."""

    def __init__(self, output_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_size = output_size

    def build(self, input_shape: Any) -> None:
        self._rows = tf.constant(adaptive_pool_matrix(int(input_shape[1]), self.output_size))
        self._cols = tf.constant(adaptive_pool_matrix(int(input_shape[2]), self.output_size))

    def call(self, x: Any) -> Any:
        rows = tf.cast(self._rows, x.dtype)
        cols = tf.cast(self._cols, x.dtype)
        return tf.einsum("oh,bhwc,pw->bopc", rows, x, cols)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return (input_shape[0], self.output_size, self.output_size, input_shape[3])


def _classifier(x: Any, num_classes: int, width: int, name: str) -> Any:
    """torchvision's AlexNet/VGG head: Dropout, Linear, ReLU, Dropout, Linear, ReLU, Linear."""
    layers = keras.layers
    x = layers.Flatten(name=name + "_flatten")(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dense(width, activation="relu", name=name + "_fc1")(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dense(width, activation="relu", name=name + "_fc2")(x)
    return layers.Dense(num_classes, name=name + "_predictions", dtype="float32")(x)


def alexnet(image_size: int, num_classes: int) -> Any:
    """torchvision.models.alexnet in Keras (channels last)."""
    layers = keras.layers
    inputs = keras.Input((image_size, image_size, 3))
    x = layers.ZeroPadding2D(2)(inputs)
    x = layers.Conv2D(64, 11, strides=4, activation="relu")(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = layers.Conv2D(192, 5, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = layers.Conv2D(384, 3, padding="same", activation="relu")(x)
    x = layers.Conv2D(256, 3, padding="same", activation="relu")(x)
    x = layers.Conv2D(256, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = AdaptiveAveragePooling2D(6)(x)
    return keras.Model(inputs, _classifier(x, num_classes, 4096, "alexnet"), name="alexnet")


def vgg16(image_size: int, num_classes: int) -> Any:
    """keras.applications.VGG16's convolutional base with torchvision's head (adaptive pool to 7x7)."""
    conv = keras.applications.VGG16(include_top=False, weights=None, input_shape=(image_size, image_size, 3))
    x = AdaptiveAveragePooling2D(7)(conv.output)
    return keras.Model(conv.input, _classifier(x, num_classes, 4096, "vgg16"), name="vgg16")


def mobilenet_v2(image_size: int, num_classes: int) -> Any:
    return keras.applications.MobileNetV2(
        input_shape=(image_size, image_size, 3), weights=None, classes=num_classes, classifier_activation=None
    )


def resnet50(image_size: int, num_classes: int) -> Any:
    return keras.applications.ResNet50(
        input_shape=(image_size, image_size, 3), weights=None, classes=num_classes, classifier_activation=None
    )


MODELS = {"alexnet": alexnet, "mobilenet_v2": mobilenet_v2, "resnet50": resnet50, "vgg16": vgg16}


def count_params(model: Any) -> ParamCount:
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    total = trainable + sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    return ParamCount(trainable, total)


def model_params(name: str, num_classes: int = 3, image_size: int = 224) -> ParamCount:
    """For the parity test: the counts of the model exactly as a run builds it."""
    return count_params(MODELS[name](image_size, num_classes))
