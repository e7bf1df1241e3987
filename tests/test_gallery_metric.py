"""Each gallery model's val_loss is what the reference measures: the validation metric (facts.json
data.validation_metric) on its corpus, recomputed with numpy from the file the build ships, within
manifest_tolerance. A model retrained, re-quantized or given a hand-typed number fails here."""
import json
from pathlib import Path

import pytest

from tinygpt import checkpoint, validation
from tinygpt.facts import FACTS
from tinygpt.train import load_corpus

ROOT = Path(__file__).resolve().parent.parent
MODELS = json.loads((ROOT / "gallery" / "manifest.json").read_text())["models"]
TOLERANCE = FACTS["data"]["validation_metric"]["manifest_tolerance"]


@pytest.mark.parametrize("entry", MODELS, ids=[m["id"] for m in MODELS])
def test_manifest_val_loss_is_the_metric(entry):
    ckpt = checkpoint.load(ROOT / "gallery" / entry["file"])
    _, corpus = load_corpus(entry["corpus"]["id"])  # prepared by the build, which `build.py test` runs first
    measured = validation.validation_loss(ckpt.config, ckpt.params, corpus)
    assert abs(measured - entry["val_loss"]) <= TOLERANCE * measured, \
        f"{entry['id']}: the manifest says {entry['val_loss']}, the reference measures {measured:.4f}"
