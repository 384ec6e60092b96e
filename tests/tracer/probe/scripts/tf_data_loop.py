"""A custom TensorFlow loop over a tf.data pipeline with prefetch, GradientTape and an optimizer; 2 epochs of
4 batches."""

import tensorflow as tf

tf.random.set_seed(0)
features = tf.random.uniform((32, 8))
labels = tf.constant([i % 3 for i in range(32)], tf.int64)
dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(8).prefetch(2)
layer = tf.keras.layers.Dense(3)
optimizer = tf.keras.optimizers.SGD(0.01)
for epoch in range(2):
    for x, y in dataset:
        with tf.GradientTape() as tape:
            logits = layer(x)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply_gradients(zip(grads, layer.trainable_variables))
    print("epoch", epoch + 1, "loss", float(loss))
