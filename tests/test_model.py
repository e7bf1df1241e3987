"""The numpy reference model: gradients against finite differences, learning, sampling, sizes."""
import math

import numpy as np
import pytest

from tinygpt import model
from tinygpt.facts import FACTS
from tinygpt.train import Trainer, TrainConfig


def random_params(config, seed):
    """Parameters with every tensor nonzero and LayerNorm gains away from 1, so no
    gradient is trivially zero and no symmetry hides a wrong term."""
    rng = np.random.default_rng(seed)
    params = model.init_params(config, seed, np.float64)
    return {k: p + 0.1 * rng.standard_normal(p.shape) for k, p in params.items()}


def test_every_gradient_matches_central_finite_differences():
    # vocab 16 keeps the check exhaustive; T one short of block_size leaves a position row unused.
    config = model.GPTConfig(vocab_size=16, n_layer=2, n_embd=8, n_head=2, block_size=5)
    params = random_params(config, 0)
    rng = np.random.default_rng(1)
    idx, targets = rng.integers(0, 16, (2, 4)), rng.integers(0, 16, (2, 4))
    _, _, acts = model.forward(config, params, idx, targets)
    grads = model.backward(config, params, acts)
    assert list(grads) == [name for name, _, _ in model.tensor_specs(config)]
    h = 1e-5
    for name, p in params.items():
        flat, numeric = p.reshape(-1), np.empty(p.size)
        for j in range(p.size):
            old = flat[j]
            flat[j] = old + h
            plus = model.forward(config, params, idx, targets)[1]
            flat[j] = old - h
            minus = model.forward(config, params, idx, targets)[1]
            flat[j] = old
            numeric[j] = (plus - minus) / (2 * h)
        analytic = grads[name].reshape(-1)
        scale = max(np.linalg.norm(numeric), np.linalg.norm(analytic))
        # A key bias cannot change softmax(q k^T), so its true gradient is 0: judge it absolutely.
        if scale < 1e-8:
            assert np.abs(numeric - analytic).max() < 1e-9, name
        else:
            assert np.linalg.norm(numeric - analytic) / scale < 1e-5, name


def test_gelu_is_exact_in_either_dtype():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 2.5, -2.5, 6.0, -6.0, 1e-12, 30.0]])
    expected = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    y64, _ = model.gelu_forward(x)
    assert y64.dtype == np.float64 and np.max(np.abs(y64 - expected)) < 1e-14
    y32, cdf32 = model.gelu_forward(x.astype(np.float32))
    assert y32.dtype == cdf32.dtype == np.float32 and np.max(np.abs(y32 - expected) / np.maximum(np.abs(expected), 1)) < 3e-7
    assert np.isnan(model.gelu_forward(np.array([np.nan]))[0])[0]


def test_float32_and_float64_agree_and_keep_their_dtype():
    config = model.GPTConfig(vocab_size=256, n_layer=2, n_embd=16, n_head=4, block_size=8)
    p64 = random_params(config, 3)
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    rng = np.random.default_rng(0)
    idx, targets = rng.integers(0, 256, (3, 8)), rng.integers(0, 256, (3, 8))
    logits32, loss32, acts = model.forward(config, p32, idx, targets)
    logits64, loss64, _ = model.forward(config, p64, idx, targets)
    assert logits32.dtype == np.float32 and logits64.dtype == np.float64
    assert all(g.dtype == np.float32 for g in model.backward(config, p32, acts).values())
    np.testing.assert_allclose(logits32, logits64, rtol=1e-4, atol=1e-5)
    assert loss32 == pytest.approx(loss64, rel=1e-5)


def test_attention_is_causal():
    config = model.GPTConfig(vocab_size=256, n_layer=2, n_embd=16, n_head=2, block_size=8)
    params = random_params(config, 4)
    a = np.array([[1, 2, 3, 4, 5, 6, 7, 8]])
    b = a.copy()
    b[0, 5:] = [200, 201, 202]
    la, lb = model.forward(config, params, a)[0], model.forward(config, params, b)[0]
    np.testing.assert_array_equal(la[0, :5], lb[0, :5])
    assert not np.allclose(la[0, 5:], lb[0, 5:])


def test_initial_loss_is_near_uniform():
    # With N(0, 0.02) weights the logits are near zero, so the loss is near ln(vocab).
    config = model.GPTConfig.from_preset("tiny")
    params = model.init_params(config, 0)
    idx = np.random.default_rng(0).integers(0, 256, (2, config.block_size))
    loss = model.forward(config, params, idx, np.roll(idx, 1, axis=1))[1]
    assert abs(loss - math.log(256)) < 0.1


def test_memorises_one_kilobyte_of_text():
    rng = np.random.default_rng(0)
    words = "the of and to in is was that for with as his he be on by at it from this had not are but".split()
    text = " ".join(rng.choice(words, 400)).encode()[:1024]
    tokens = np.frombuffer(text, np.uint8).astype(np.int64)
    T = 64
    n = (len(tokens) - 1) // T
    x = np.stack([tokens[i * T:(i + 1) * T] for i in range(n)])
    y = np.stack([tokens[i * T + 1:(i + 1) * T + 1] for i in range(n)])
    config = model.GPTConfig(vocab_size=256, n_layer=2, n_embd=32, n_head=2, block_size=T)
    trainer = Trainer(config, TrainConfig(batch_size=n, lr=1e-2, warmup_steps=5, weight_decay=0.0))
    best = math.inf
    for step in range(300):
        best = min(best, trainer.train_step(x, y)["loss"])
        if best < 0.1:
            break
    assert best < 0.1, f"loss only fell to {best:.3f} in 300 steps"


def test_greedy_sampling_is_deterministic_and_is_the_argmax_chain():
    config = model.GPTConfig(vocab_size=256, n_layer=2, n_embd=16, n_head=2, block_size=8)
    params = random_params(config, 5)
    prompt = list(b"Hello")
    first = model.generate(config, params, prompt, 12, temperature=0, seed=1)
    assert first == model.generate(config, params, prompt, 12, temperature=0, seed=99)
    tokens = list(prompt)
    for _ in range(12):  # context longer than block_size is cropped to the last 8 tokens
        logits = model.forward(config, params, np.array([tokens[-8:]]))[0][0, -1]
        tokens.append(int(np.argmax(logits)))
    assert first == tokens[len(prompt):]
    assert model.generate(config, params, prompt, 12, temperature=1.0, top_k=1, seed=7) == first


def test_sampling_with_temperature_is_seeded_and_respects_top_k():
    logits = np.array([0.0, 1.0, 2.0, 3.0, 0.5])
    draws = [model.pick_token(logits, 1.0, 2, np.random.default_rng(s)) for s in range(200)]
    assert set(draws) == {2, 3}
    counts = np.bincount(draws, minlength=5)
    assert counts[3] > counts[2]  # p(3) = e/(1+e) = 0.73 under top-2
    again = [model.pick_token(logits, 1.0, 2, np.random.default_rng(s)) for s in range(200)]
    assert draws == again
    with pytest.raises(ValueError, match="temperature"):
        model.pick_token(logits, -1.0, 0, np.random.default_rng(0))


def test_top_p_keeps_the_fewest_most_likely_tokens_that_reach_p():
    # Probabilities 0.5, 0.25, 0.125, 0.125: p 0.5 keeps id 0, 0.6 adds 1, 0.8 adds the lower of the tied 2 and 3.
    logits = np.log([4.0, 2.0, 1.0, 1.0])
    kept = lambda p: np.flatnonzero(model.draw_weights(logits, 1.0, 0, p)).tolist()  # noqa: E731
    assert kept(1e-6) == [0] and kept(0.5) == [0] and kept(0.6) == [0, 1] and kept(0.8) == [0, 1, 2] and kept(1.0) == [0, 1, 2, 3]
    assert kept(0.6) == np.flatnonzero(model.draw_weights(logits, 1.0, 3, 0.6)).tolist()
    assert np.flatnonzero(model.draw_weights(logits, 1.0, 2, 0.6)).tolist() == [0]  # of the top 2 (2/3, 1/3)
    draws = {model.pick_token(logits, 1.0, 0, np.random.default_rng(s), top_p=0.6) for s in range(200)}
    assert draws == {0, 1}
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="top_p"):
            model.draw_weights(logits, 1.0, 0, bad)


def test_parameter_counts_follow_the_gpt2_closed_form():
    # Per block: two LayerNorms (4C), q/k/v/o (4C^2 + 4C), MLP (8C^2 + 5C) = 12C^2 + 13C.
    for p in FACTS["presets"]:
        config = model.GPTConfig.from_preset(p["id"])
        V, T, C, L = config.vocab_size, config.block_size, config.n_embd, config.n_layer
        expected = V * C + T * C + 2 * C + L * (12 * C * C + 13 * C)
        assert model.param_count(config) == expected, p["id"]
        assert sum(a.size for a in model.init_params(config, 0).values()) == expected
    assert round(model.param_count(model.GPTConfig.from_preset("huge")) / 1e6, 1) == 10.8


def test_init_is_seeded_and_follows_facts():
    config = model.GPTConfig(vocab_size=256, n_layer=4, n_embd=64, n_head=4, block_size=32)
    a, b = model.init_params(config, 7), model.init_params(config, 7)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["token_embedding.weight"], model.init_params(config, 8)["token_embedding.weight"])
    std = FACTS["model"]["init_std"]
    assert np.std(a["token_embedding.weight"]) == pytest.approx(std, rel=0.05)
    assert np.std(a["blocks.0.mlp.fc_out.weight"]) == pytest.approx(std / math.sqrt(8), rel=0.05)
    assert np.all(a["blocks.1.ln2.weight"] == 1) and np.all(a["blocks.1.attn.o_proj.bias"] == 0)
    flat = model.flatten(a, config)
    assert flat.size == model.param_count(config)
    assert all(np.array_equal(model.unflatten(flat, config)[k], a[k]) for k in a)


@pytest.mark.parametrize("idx, message", [
    (np.zeros(4, dtype=int), "batch, time"),
    (np.zeros((1, 9), dtype=int), "block_size"),
    (np.full((1, 3), 256), "outside"),
    (np.full((1, 3), -1), "outside"),
])
def test_bad_token_ids_are_rejected(idx, message):
    config = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=8, n_head=2, block_size=8)
    with pytest.raises(ValueError, match=message):
        model.forward(config, model.init_params(config), idx)


def test_bad_configs_are_rejected():
    with pytest.raises(ValueError, match="multiple of n_head"):
        model.GPTConfig(256, 1, 10, 3, 8)
    with pytest.raises(ValueError, match="n_layer"):
        model.GPTConfig(256, 0, 8, 2, 8)
