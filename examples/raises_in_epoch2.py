"""A PyTorch loop that fails in its second epoch, as a bug in a data transform would: the run ends
`failed`, and `tracer show` gives the traceback's last line.

    tracer profile -- python examples/raises_in_epoch2.py
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1, 4):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if epoch == 2:
                raise ValueError(f"bad batch in epoch {epoch}: a transform returned the wrong shape")
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
