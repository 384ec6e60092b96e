"""A plain MXNet Gluon loop: a DataLoader, autograd, a Trainer; 2 epochs of 4 batches."""

import mxnet as mx
from mxnet import autograd, gluon, nd

mx.random.seed(0)
data = gluon.data.ArrayDataset(nd.random.uniform(shape=(32, 8)), nd.array([i % 3 for i in range(32)]))
loader = gluon.data.DataLoader(data, batch_size=8, num_workers=0)
net = gluon.nn.Dense(3)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
for epoch in range(2):
    for x, y in loader:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(8)
    print("epoch", epoch + 1, "loss", float(loss.mean().asscalar()))
