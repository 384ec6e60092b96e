"""A loop over array slices with no loader, in the framework named by the first argument (tensorflow,
mxnet, paddle, jax: optax's update outside jit, the gradient jitted; jax-jit: the whole step, optax's
update too, inside one jit): 2 epochs of 4 updates of 8 samples. The probe sees only the optimizer's updates."""

import sys

import numpy as np

framework = sys.argv[1]
x = np.random.default_rng(0).normal(size=(32, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
slices = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 32, 8)]

if framework == "tensorflow":
    import tensorflow as tf

    layer, opt = tf.keras.layers.Dense(1), tf.keras.optimizers.SGD(0.1)
    for _epoch in range(2):
        for xb, yb in slices:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((layer(xb) - yb) ** 2)
            grads = tape.gradient(loss, layer.trainable_variables)
            opt.apply_gradients(zip(grads, layer.trainable_variables))
elif framework == "mxnet":
    import mxnet as mx
    from mxnet import autograd, gluon

    net = gluon.nn.Dense(1)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    for _epoch in range(2):
        for xb, yb in slices:
            with autograd.record():
                loss = ((net(mx.nd.array(xb)) - mx.nd.array(yb)) ** 2).mean()
            loss.backward()
            trainer.step(len(xb))
elif framework == "paddle":
    import paddle

    net = paddle.nn.Linear(8, 1)
    opt = paddle.optimizer.SGD(0.1, parameters=net.parameters())
    for _epoch in range(2):
        for xb, yb in slices:
            loss = ((net(paddle.to_tensor(xb)) - paddle.to_tensor(yb)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.clear_grad()
elif framework in ("jax", "jax-jit"):
    import jax
    import jax.numpy as jnp
    import optax

    params = {"w": jnp.zeros((8, 1)), "b": jnp.zeros(1)}
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))  # a chain: one update a step
    state = optimizer.init(params)

    def loss_fn(p, xb, yb):
        return jnp.mean((xb @ p["w"] + p["b"] - yb) ** 2)

    grad = jax.jit(jax.value_and_grad(loss_fn))

    @jax.jit
    def whole_step(p, s, xb, yb):
        loss, g = jax.value_and_grad(loss_fn)(p, xb, yb)
        updates, s = optimizer.update(g, s, p)
        return optax.apply_updates(p, updates), s, loss

    for _epoch in range(2):
        for xb, yb in slices:
            if framework == "jax":
                loss, g = grad(params, xb, yb)
                updates, state = optimizer.update(g, state, params)
                params = optax.apply_updates(params, updates)
            else:
                params, state, loss = whole_step(params, state, xb, yb)
    print("loss", float(loss))
print("updates", 8)
