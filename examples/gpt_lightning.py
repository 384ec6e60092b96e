"""The character-level GPT of gpt_pytorch.py, trained by PyTorch Lightning's `Trainer.fit`.

    python examples/gpt_lightning.py --epochs 2
    tracer profile -- python examples/gpt_lightning.py --epochs 2

A script as Lightning users write one: a `LightningModule` with `training_step` and
`configure_optimizers`, a `LightningDataModule`, and `Trainer(max_epochs=...)`. Lightning iterates the
DataLoader, calls backward and steps the optimizer itself; the tool's probe sees the steps through the
DataLoader as in a plain loop; the validation loops (Lightning's sanity check before the first epoch,
one after each) are not epochs. Same model, data and batches as gpt_pytorch.py, so `tracer compare`
shows what Lightning's loop costs beside a hand-written one.
"""

import math
import sys
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).parent))
from gpt_pytorch import CORPUS, GPT, CharWindows, training_arguments  # noqa: E402 - the same model and data as the plain loop


class CharGPT(L.LightningModule):
    def __init__(self, vocab: int, block: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.model = GPT(vocab, block)
        self.epoch_losses: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x).reshape(-1, self.vocab), y.reshape(-1))
        self.epoch_losses.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x).reshape(-1, self.vocab), y.reshape(-1))
        self.log("val_loss", loss)

    def on_train_epoch_end(self) -> None:
        mean = sum(self.epoch_losses) / len(self.epoch_losses)
        print(f"epoch {self.current_epoch + 1}: loss {mean:.3f} (perplexity {math.exp(mean):.1f})")
        self.epoch_losses.clear()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


class CharData(L.LightningDataModule):
    """Training windows from the text, validation windows from its last 2,000 characters."""

    def __init__(self, block: int, samples: int, batch: int, workers: int) -> None:
        super().__init__()
        text = CORPUS.read_text()
        self.data, self.held_out = CharWindows(text, block, samples), CharWindows(text[-2000:], block, 64)
        self.batch, self.workers = batch, workers

    def _loader(self, data: CharWindows, shuffle: bool) -> DataLoader:
        return DataLoader(
            data,
            batch_size=self.batch,
            shuffle=shuffle,
            drop_last=shuffle,
            num_workers=self.workers,
            persistent_workers=self.workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.data, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.held_out, shuffle=False)


def main() -> None:
    p = training_arguments(__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--accelerator", default="auto", help="Lightning's accelerator: auto, cpu, gpu")
    args = p.parse_args()

    L.seed_everything(0, verbose=False)
    data = CharData(args.block, args.samples, args.batch, args.workers)
    model = CharGPT(data.data.vocab, args.block)
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator=args.accelerator,
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=data)


if __name__ == "__main__":
    main()
