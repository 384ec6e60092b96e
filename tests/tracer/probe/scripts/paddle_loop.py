"""A plain PaddlePaddle loop over paddle.io.DataLoader (`loop`), or the same data through paddle.Model.fit (`fit`);
2 epochs of 4 batches."""

import sys

import numpy as np
import paddle


class Points(paddle.io.Dataset):
    def __init__(self):
        rng = np.random.default_rng(0)
        self.x = rng.random((32, 8), dtype=np.float32)
        self.y = np.arange(32, dtype=np.int64) % 3

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


paddle.seed(0)
net = paddle.nn.Linear(8, 3)
optimizer = paddle.optimizer.SGD(learning_rate=0.01, parameters=net.parameters())
if sys.argv[1:] == ["fit"]:
    model = paddle.Model(net)
    model.prepare(optimizer, paddle.nn.CrossEntropyLoss())
    model.fit(Points(), batch_size=8, epochs=2, verbose=0)
else:
    loader = paddle.io.DataLoader(Points(), batch_size=8, num_workers=0)
    for epoch in range(2):
        for x, y in loader:
            loss = paddle.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
        print("epoch", epoch + 1, "loss", float(loss))
