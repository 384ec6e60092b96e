"""A character-level GPT (about 340 thousand parameters) trained on examples/data/tiny_corpus.txt, in PyTorch.

    python examples/gpt_pytorch.py --epochs 2
    tracer profile -- python examples/gpt_pytorch.py --epochs 2

The same model, data and batches as gpt_jax.py (flax, fed by grain) and gpt_keras.py (Keras fit), so
`tracer compare` puts the three side by side.
"""

import argparse
import math
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CORPUS = Path(__file__).with_name("data") / "tiny_corpus.txt"


class CharWindows(Dataset):
    """Every `block + 1` characters of the text, `block // 2` apart: inputs and next-character targets."""

    def __init__(self, text: str, block: int, samples: int) -> None:
        chars = sorted(set(text))
        self.vocab = len(chars)
        ids = torch.tensor([chars.index(c) for c in text])
        starts = range(0, len(ids) - block - 1, block // 2)
        self.windows = torch.stack([ids[s : s + block + 1] for s in starts])[:samples]

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int):
        w = self.windows[i]
        return w[:-1], w[1:]


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, dim: int = 96, layers: int = 3, heads: int = 4) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, vocab))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.blocks(x))


def training_arguments(description: str) -> argparse.ArgumentParser:
    """The options of every PyTorch example of this GPT (this loop, Lightning's, transformers' Trainer)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--samples", type=int, default=512, help="windows of text per epoch")
    return p


def main() -> None:
    p = training_arguments(__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()

    torch.manual_seed(0)
    data = CharWindows(CORPUS.read_text(), args.block, args.samples)
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, drop_last=True)
    model = GPT(data.vocab, args.block).to(args.device)
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for epoch in range(1, args.epochs + 1):
        total, steps = 0.0, 0
        for x, y in loader:
            x, y = x.to(args.device), y.to(args.device)
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.reshape(-1, data.vocab), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, steps = total + loss.item(), steps + 1
        print(f"epoch {epoch}: loss {total / steps:.3f} (perplexity {math.exp(total / steps):.1f})")


if __name__ == "__main__":
    main()
