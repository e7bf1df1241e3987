"""LoRA in the numpy reference: adapter gradients against finite differences, a new
adapter changes nothing, merging equals applying, training moves only the adapter, and the
golden LoRA fixture the engines replay (tests/fixtures/golden_lora_tiny.json) is what its command makes."""
import json
from pathlib import Path

import numpy as np
import pytest

from tinygpt import checkpoint, lora, model
from tinygpt.facts import FACTS
from tinygpt.train import TrainConfig
from tests.oracles import golden, golden_lora
from tests.test_golden import assert_same, floats
from tests.test_model import random_params

ROOT = Path(__file__).resolve().parent.parent
CONFIG = model.GPTConfig(vocab_size=16, n_layer=2, n_embd=8, n_head=2, block_size=5)
EVERY = tuple(lora.PROJECTIONS)


def random_adapter(config, lc, seed):
    """An adapter with B nonzero too, so that A's gradient is not trivially 0."""
    adapter = lora.Adapter.init(config, lc, seed, np.float64)
    rng = np.random.default_rng(seed + 1)
    for t in adapter.tensors.values():
        t += 0.3 * rng.standard_normal(t.shape)
    return adapter


def numeric_gradient(loss, array, h=1e-5):
    flat, out = array.reshape(-1), np.empty(array.size)
    for j in range(array.size):
        old = flat[j]
        flat[j] = old + h
        plus = loss()
        flat[j] = old - h
        minus = loss()
        flat[j] = old
        out[j] = (plus - minus) / (2 * h)
    return out


def relative_error(numeric, analytic):
    return np.linalg.norm(numeric - analytic) / max(np.linalg.norm(numeric), np.linalg.norm(analytic))


def test_adapter_gradients_match_central_finite_differences():
    params = random_params(CONFIG, 0)
    adapter = random_adapter(CONFIG, lora.LoraConfig(rank=3, alpha=5.0, targets=EVERY), 2)
    rng = np.random.default_rng(1)
    idx, targets = rng.integers(0, 16, (2, 4)), rng.integers(0, 16, (2, 4))
    loss = lambda: model.forward(CONFIG, params, idx, targets, lora=adapter)[1]  # noqa: E731
    grads = model.backward(CONFIG, params, model.forward(CONFIG, params, idx, targets, lora=adapter)[2])
    assert list(grads)[-len(adapter.tensors):] == [name for name, _ in lora.adapter_specs(CONFIG, adapter.lc)]
    for name, t in adapter.tensors.items():
        assert relative_error(numeric_gradient(loss, t), grads[name].reshape(-1)) < 1e-5, name
    # The input gradient through the adapter's path reaches what lies below it: the first block's LayerNorm and the embeddings.
    for name in ("blocks.0.ln1.weight", "blocks.0.ln2.bias", "position_embedding.weight", "blocks.0.attn.q_proj.weight"):
        assert relative_error(numeric_gradient(loss, params[name]), grads[name].reshape(-1)) < 1e-5, name


def test_a_new_adapter_leaves_the_base_unchanged_and_merging_equals_applying():
    params = model.init_params(CONFIG, 0)
    idx = np.random.default_rng(3).integers(0, 16, (2, 5))
    fresh = lora.Adapter.init(CONFIG, lora.LoraConfig(), seed=4)
    assert np.array_equal(model.forward(CONFIG, params, idx, lora=fresh)[0], model.forward(CONFIG, params, idx)[0])
    trained = random_adapter(CONFIG, lora.LoraConfig(rank=2, targets=("k", "o", "fc_out")), 5)
    base = random_params(CONFIG, 6)
    applied = model.forward(CONFIG, base, idx, lora=trained)[0]
    merged = trained.merge(base)
    assert np.allclose(model.forward(CONFIG, merged, idx)[0], applied, rtol=0, atol=1e-12)
    assert not np.allclose(model.forward(CONFIG, base, idx)[0], applied, atol=1e-3)  # the adapter does something
    untouched = [n for n in base if n not in ("blocks.0.attn.k_proj.weight", "blocks.1.attn.k_proj.weight",
                                              "blocks.0.attn.o_proj.weight", "blocks.1.attn.o_proj.weight",
                                              "blocks.0.mlp.fc_out.weight", "blocks.1.mlp.fc_out.weight")]
    assert all(merged[n] is base[n] for n in untouched) and len(untouched) == len(base) - 6


def test_training_moves_the_adapter_alone_and_fits_a_new_text():
    base = checkpoint.load(ROOT / "gallery" / "shakespeare-tiny.tinygpt")  # a model that knows English, not this line
    config, params = base.config, base.params
    frozen = {k: p.copy() for k, p in params.items()}
    T = config.block_size
    text = np.frombuffer(b"def adapter(x): return x @ lora_a @ lora_b  # low rank\n" * 12, np.uint8).astype(np.int64)
    x = np.stack([text[i:i + T] for i in range(0, 8 * T, T)])
    y = np.stack([text[i + 1:i + T + 1] for i in range(0, 8 * T, T)])
    trainer = lora.LoraTrainer(config, params, lora.Adapter.init(config, lora.LoraConfig(), seed=1),
                               TrainConfig(batch_size=8, lr=1e-2, warmup_steps=5))
    first = trainer.train_step(x, y)["loss"]
    for _ in range(40):
        last = trainer.train_step(x, y)["loss"]
    assert last < 0.5 * first, f"the adapter's loss went from {first:.3f} to {last:.3f}"
    assert all(np.array_equal(params[k], frozen[k]) for k in params)
    assert set(trainer.m) == set(trainer.v) == set(trainer.adapter.tensors)


def test_a_huge_adapter_at_the_default_rank_on_q_and_v_is_small():
    lc = lora.LoraConfig()
    assert (lc.rank, lc.targets) == (8, ("q", "v"))
    specs = lora.adapter_specs(model.GPTConfig.from_preset("huge"), lc)
    assert len(specs) == 2 * 2 * model.GPTConfig.from_preset("huge").n_layer
    assert 4 * sum(r * c for _, (r, c) in specs) < 1_000_000  # the target, as f32


@pytest.mark.parametrize("kwargs, message", [
    ({"rank": 0}, "rank must be an integer from 1 to"),
    ({"rank": FACTS["lora"]["max_rank"] + 1}, "rank must be an integer from 1 to"),
    ({"alpha": float("nan")}, "alpha must be a positive number"),
    ({"targets": ("q", "gate")}, "targets must be distinct names from q, k, v, o, fc_in, fc_out"),
    ({"targets": ()}, "targets must be distinct"),
    ({"targets": ("v", "v")}, "targets must be distinct"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        lora.LoraConfig(**kwargs)


def test_the_golden_lora_fixture_is_what_its_command_generates_and_sane():
    committed = json.loads(golden_lora.PATH.read_text())
    assert_same(committed, json.loads(golden.dumps(golden_lora.generate())), "golden_lora")
    assert golden_lora.PATH.stat().st_size < 300_000
    config = golden.CONFIG
    assert floats(committed["base_params"]).size == model.param_count(config)
    specs = lora.adapter_specs(config, lora.LoraConfig.from_header({**committed["lora"], "base_sha256": ""}))
    assert [(t["name"], tuple(t["shape"])) for t in committed["tensors"]] == specs
    assert floats(committed["init_adapter"]).size == sum(t["size"] for t in committed["tensors"])
    steps = committed["steps"]
    assert len(steps) == len(json.loads(golden.PATH.read_text())["steps"])
    # float32 tracks float64, the adapter learns the batch it is judged on, and greedy choices are far from ties.
    assert all(abs(s["loss_f32"] - s["loss_f64"]) < 1e-5 * s["loss_f64"] for s in steps)
    assert committed["final"]["loss_f32"] < steps[0]["loss_f32"] - 0.02
    assert committed["sample"]["min_margin"] > 1e-3
