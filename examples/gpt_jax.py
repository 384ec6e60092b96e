"""The character-level GPT of gpt_pytorch.py in JAX: flax (linen) for the model, optax for AdamW,
grain for the input pipeline.

    python examples/gpt_jax.py --epochs 2
    tracer profile -- python examples/gpt_jax.py --epochs 2
"""

import argparse
import math
from pathlib import Path

import flax.linen as nn
import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax

CORPUS = Path(__file__).with_name("data") / "tiny_corpus.txt"


def char_windows(text: str, block: int, samples: int) -> tuple[np.ndarray, int]:
    """Every `block + 1` characters of the text, `block // 2` apart (as gpt_pytorch.py's CharWindows)."""
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.int32)
    starts = range(0, len(ids) - block - 1, block // 2)
    return np.stack([ids[s : s + block + 1] for s in starts])[:samples], len(chars)


class Block(nn.Module):
    dim: int
    heads: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2]))
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(nn.LayerNorm()(x), mask=mask)
        h = nn.Dense(self.dim)(nn.gelu(nn.Dense(4 * self.dim)(nn.LayerNorm()(x))))
        return x + h


class GPT(nn.Module):
    vocab: int
    block: int
    dim: int = 96
    layers: int = 3
    heads: int = 4

    @nn.compact
    def __call__(self, idx: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.dim)(idx) + nn.Embed(self.block, self.dim)(jnp.arange(idx.shape[1]))
        for _ in range(self.layers):
            x = Block(self.dim, self.heads)(x)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--samples", type=int, default=512, help="windows of text per epoch")
    args = p.parse_args()

    windows, vocab = char_windows(CORPUS.read_text(), args.block, args.samples)
    model = GPT(vocab, args.block)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, args.block), jnp.int32))
    print(f"parameters: {sum(x.size for x in jax.tree_util.tree_leaves(params)):,}")
    optimizer = optax.adamw(3e-3)
    state = optimizer.init(params)

    @jax.jit
    def train_step(params, state, batch):
        def loss_fn(params):
            logits = model.apply(params, batch[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    for epoch in range(1, args.epochs + 1):
        batches = grain.MapDataset.source(windows).shuffle(seed=epoch).batch(args.batch, drop_remainder=True)
        losses = []
        for batch in batches:
            params, state, loss = train_step(params, state, batch)
            losses.append(loss)
        mean = float(jnp.mean(jnp.stack(losses)))
        print(f"epoch {epoch}: loss {mean:.3f} (perplexity {math.exp(mean):.1f})")


if __name__ == "__main__":
    main()
