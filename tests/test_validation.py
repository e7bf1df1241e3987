"""The validation metric (facts.json data.validation_metric): its windows, the same in Python and
TypeScript, its value and the CLI. That each engine's Trainer.validationLoss gets the reference's
value is a case of the backend conformance suite (tests/oracles/conformance.py validation.json)."""
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tinygpt import checkpoint, model, validation
from tinygpt.facts import FACTS
from tinygpt.site_build.node import node_bundle
from tinygpt.train import split, windows

ROOT = Path(__file__).resolve().parent.parent

CAP = FACTS["data"]["validation_metric"]["max_windows"]
# (validation bytes, block_size, cap): whole windows fewer than, equal to and more than the cap,
# the gallery's splits and the largest split an upload can have.
PAIRS = [(100, 8, CAP), (100, 8, 4), (9, 8, CAP), (18, 8, 2), (505316, 64, CAP), (505316, 192, CAP),
         (381130, 256, CAP), (381130, 64, 5000), (6710886, 256, CAP), (6710886, 7, 10**6)]


def test_windows_are_whole_disjoint_and_spread_over_the_split():
    assert validation.validation_starts(100, 8, 4) == [0, 25, 50, 75]
    for n, T, cap in PAIRS:
        starts = validation.validation_starts(n, T, cap)
        assert len(starts) == min(n // (T + 1), cap)
        assert starts[0] == 0 and all(b - a >= T + 1 for a, b in zip(starts, starts[1:]))
        # The last one ends inside the split, within one spacing of its end: nothing past the start is left out.
        assert n - n / len(starts) < starts[-1] + T + 1 <= n


def test_every_window_is_used_below_the_cap_and_the_cap_holds_above_it():
    assert validation.validation_starts(100, 8) == [0, 9, 18, 27, 36, 45, 54, 63, 72, 81, 90]
    assert len(validation.validation_starts(CAP * 65 + 64, 64)) == CAP
    assert len(validation.validation_starts(CAP * 65 - 1, 64)) == CAP - 1
    with pytest.raises(ValueError, match="cannot hold one window of 8"):
        validation.validation_starts(8, 8)


def test_typescript_computes_the_same_starts(tmp_path):
    data = node_bundle(ROOT, ["webapp/engine/data.ts"], tmp_path)[0]
    script = (f"import {{ validationStarts }} from {json.dumps(data.as_uri())};"
              f"console.log(JSON.stringify({json.dumps(PAIRS)}.map(([n, T, cap]) => validationStarts(n, T, cap))));")
    run = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [validation.validation_starts(n, T, cap) for n, T, cap in PAIRS]


def small_model():
    config = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=16, n_head=2, block_size=8)
    text = b"It was the best of times, it was the worst of times, it was the age of wisdom.\n" * 60
    return config, model.init_params(config, 3), text


def test_the_value_is_the_mean_over_its_windows_and_repeats_exactly():
    config, params, text = small_model()
    _, val = split(text)
    starts = validation.validation_starts(len(val), 8)
    assert len(starts) > validation.BATCH_WINDOWS and len(starts) % validation.BATCH_WINDOWS  # a short last batch
    one_by_one = [model.forward(config, params, *windows(val, [s], 8))[1] for s in starts]
    value = validation.validation_loss(config, params, text)
    assert value == pytest.approx(np.mean(one_by_one), rel=1e-6)
    assert validation.validation_loss(config, params, text) == value
    assert validation.validation_loss(config, params, text, max_windows=3) != value


def test_cli_prints_the_metric(tmp_path, capsys):
    config, params, text = small_model()
    path, corpus = tmp_path / "m.tinygpt", tmp_path / "times.txt"
    checkpoint.save(path, checkpoint.Checkpoint(config=config, params=params))
    corpus.write_bytes(text)
    validation.main([str(path), "--corpus", str(corpus)])
    out = capsys.readouterr().out
    want = validation.validation_loss(config, params, text)
    assert f"on times: validation loss {want:.4f} over {len(split(text)[1]) // 9} windows of 8+1 bytes" in out
