"""Learning rules: a speed figure is worth comparing only for a run that learns (issue 24 item 10)."""

from __future__ import annotations

import math

from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.inputs import RunTables
from analyzers.diagnosis.verdict import Evidence, RuleName, Severity, Verdict, not_measured, quiet, rule
from analyzers.figures.learning import at_chance, chance_loss
from analyzers.figures.steady import WARMUP_EPOCHS
from tracer.core.schema import CLASSES, MODEL_FACTS

CHANCE_LEVEL = RuleName("chance-level", "learning: still at chance level")


@rule(CHANCE_LEVEL)
def chance_level(t: RunTables) -> Verdict:
    """The last epoch after the warm-up still has the loss of a uniform guess: the model learned nothing
    (too few steps, a learning rate too small or too large, labels that do not match the images)."""
    name, title = CHANCE_LEVEL
    split = t.phases.split  # the steady epochs of analyzers.figures.phases, none when the run has only its warm-up
    after = [] if split.includes_warmup else [e for e in t.epochs if e.epoch in split.steady]
    if not after:
        return not_measured(name, title, f"no epoch after the first {WARMUP_EPOCHS} (warm-up)")
    spec = t.record.spec
    classes = len(t.record.dataset.classes) if t.record.dataset else (spec.num_classes if spec else 0)
    if t.record.command is not None:  # a user's script: its class count as the probe read it, else no guess
        said = t.record.knobs.get(f"{MODEL_FACTS}.{CLASSES}")
        if not isinstance(said, int) or isinstance(said, bool) or said < 2:
            return not_measured(name, title, "the script's class count was not read (no cross-entropy seen)")
        classes = said
    if classes < 2:  # an import records no class count
        return not_measured(name, title, "the class count was not recorded")
    last = after[-1]
    if not math.isfinite(last.loss):
        return not_measured(name, title, f"the loss of epoch {last.epoch} is not a number (the run diverged)")
    chance = chance_loss(classes)
    off_pct = 100 * abs(last.loss - chance) / chance
    evidence = (
        Evidence(f"loss, epoch {last.epoch}", last.loss, ""),
        Evidence(f"ln({classes} classes)", chance, ""),
        Evidence("training accuracy", None if last.accuracy is None else 100 * last.accuracy, "%"),
        Evidence("chance accuracy", 100 / classes, "%"),
    )
    if not at_chance(last.loss, classes):
        return quiet(name, title, f"the loss left chance level ({off_pct:.0f} % from ln {classes})",
                     off_pct, "% from ln(classes)", th.CHANCE_LOSS_PCT, evidence)  # fmt: skip
    return Verdict(
        name,
        title,
        True,
        True,
        Severity.MEDIUM,
        f"after the warm-up the loss is still ln {classes} (a uniform guess): its speed is that of a model that"
        " learns nothing, so check it learns before comparing it",
        off_pct,
        "% from ln(classes)",
        th.CHANCE_LOSS_PCT,
        evidence,
        "more epochs, or another --lr (the study's 0.001 with momentum 0.9 learns slowly at batch 100)",
    )
