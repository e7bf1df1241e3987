"""Training pieces of the reference: schedule, clipping, AdamW, data split, the CLI."""
import hashlib
import math

import numpy as np
import pytest

from tinygpt import checkpoint, model, train
from tinygpt.facts import FACTS


def test_warmup_is_linear_then_constant():
    tc = train.TrainConfig(batch_size=1, lr=0.01, warmup_steps=4)
    assert [train.lr_at(s, tc) for s in range(6)] == pytest.approx([0.0025, 0.005, 0.0075, 0.01, 0.01, 0.01])
    assert train.lr_at(0, train.TrainConfig(batch_size=1, lr=0.01, warmup_steps=0)) == 0.01


def test_clipping_scales_to_the_max_norm_only_when_above_it():
    grads = {"a": np.array([3.0, 0.0]), "b": np.array([[0.0, 4.0]])}
    assert train.clip_grad_norm(grads, 1.0) == pytest.approx(5.0)
    assert math.sqrt(sum(np.sum(g * g) for g in grads.values())) == pytest.approx(1.0)
    np.testing.assert_allclose(grads["b"], [[0.0, 0.8]])
    small = {"a": np.array([0.3, 0.4])}
    assert train.clip_grad_norm(small, 1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(small["a"], [0.3, 0.4])


def test_adamw_first_step_is_sign_of_gradient_plus_decoupled_decay_on_matrices():
    # After one step the bias-corrected moments are g and g^2, so the update is g/(|g| + eps).
    tc = train.TrainConfig(batch_size=1, lr=0.1, weight_decay=0.5, eps=1e-8)
    params = {"w": np.array([[1.0, -2.0]]), "b": np.array([1.0, -2.0])}
    grads = {"w": np.array([[0.5, -0.25]]), "b": np.array([0.5, -0.25])}
    m = {k: np.zeros_like(p) for k, p in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    train.adamw_update(params, grads, m, v, 1, 0.1, tc)
    np.testing.assert_allclose(params["b"], [1.0 - 0.1, -2.0 + 0.1], rtol=1e-7)
    np.testing.assert_allclose(params["w"], [[1.0 - 0.1 - 0.1 * 0.5 * 1.0, -2.0 + 0.1 + 0.1 * 0.5 * 2.0]], rtol=1e-7)
    np.testing.assert_allclose(m["w"], [[0.05, -0.025]])
    np.testing.assert_allclose(v["w"], [[0.05 * 0.25, 0.05 * 0.0625]])


def test_adamw_second_step_uses_bias_corrected_moments():
    tc = train.TrainConfig(batch_size=1, lr=1.0, weight_decay=0.0, eps=0.0)
    p, g1, g2 = np.array([0.0]), np.array([1.0]), np.array([3.0])
    m, v = {"p": np.zeros(1)}, {"p": np.zeros(1)}
    params = {"p": p}
    train.adamw_update(params, {"p": g1}, m, v, 1, 1.0, tc)
    train.adamw_update(params, {"p": g2}, m, v, 2, 1.0, tc)
    b1, b2 = tc.beta1, tc.beta2
    m_hat = (b1 * (1 - b1) * 1 + (1 - b1) * 3) / (1 - b1 ** 2)
    v_hat = (b2 * (1 - b2) * 1 + (1 - b2) * 9) / (1 - b2 ** 2)
    assert params["p"][0] == pytest.approx(-1.0 - m_hat / math.sqrt(v_hat))


def test_split_keeps_the_last_val_fraction_for_validation():
    data = bytes(range(200)) * 5
    tr, val = train.split(data)
    n_val = int(len(data) * FACTS["data"]["val_fraction"])
    assert len(val) == n_val and len(tr) + len(val) == len(data)
    assert bytes(val) == data[-n_val:] and bytes(tr) == data[:-n_val]


def test_batches_are_windows_and_targets_are_shifted_by_one():
    tokens = np.arange(100, dtype=np.uint8)
    x, y = train.get_batch(tokens, 5, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (5, 8)
    np.testing.assert_array_equal(y, x + 1)
    np.testing.assert_array_equal(np.diff(x, axis=1), 1)
    with pytest.raises(ValueError, match="window"):
        train.get_batch(tokens[:8], 1, 8, np.random.default_rng(0))


def test_trainer_step_lowers_the_loss_and_evaluate_is_repeatable():
    config = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=16, n_head=2, block_size=16)
    tc = train.TrainConfig(batch_size=4, lr=1e-2, warmup_steps=1)
    trainer = train.Trainer(config, tc)
    tokens = np.frombuffer(b"abcabcabcabd" * 20, np.uint8)
    x, y = train.get_batch(tokens, 4, 16, np.random.default_rng(0))
    first = trainer.train_step(x, y)
    for _ in range(10):
        last = trainer.train_step(x, y)
    assert trainer.step == 11 and last["loss"] < first["loss"] - 1.0
    assert first["lr"] == 1e-2 and first["grad_norm"] > 0
    a = train.evaluate(config, trainer.params, tokens, 2, 4)
    assert a == train.evaluate(config, trainer.params, tokens, 2, 4)


def test_evaluate_uses_evenly_spaced_windows_whatever_the_seed():
    assert train.val_starts(100, 8, 4) == [0, 23, 46, 69]
    config = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=16, n_head=2, block_size=8)
    params = model.init_params(config, 3)
    tokens = np.frombuffer(bytes(range(97, 123)) * 4, np.uint8)
    starts = train.val_starts(len(tokens), 8, 6)
    x = np.stack([tokens[s:s + 8] for s in starts]).astype(np.int64)
    y = np.stack([tokens[s + 1:s + 9] for s in starts]).astype(np.int64)
    by_batch = [model.forward(config, params, x[i:i + 3], y[i:i + 3])[1] for i in (0, 3)]
    assert train.evaluate(config, params, tokens, 2, 3) == pytest.approx(np.mean(by_batch), rel=1e-12)


def test_cli_trains_and_writes_a_checkpoint(tmp_path, capsys):
    corpus = tmp_path / "tiny.txt"
    corpus.write_bytes(b"To be, or not to be, that is the question.\n" * 30)
    out = tmp_path / "run.tinygpt"
    train.main(["--preset", "tiny", "--corpus", str(corpus), "--steps", "2", "--eval-every", "2",
                "--out", str(out), "--optimizer-state"])
    assert "val" in capsys.readouterr().out
    ckpt = checkpoint.load(out)
    assert ckpt.config == model.GPTConfig.from_preset("tiny")
    assert ckpt.trainer["step"] == 2 and [p["step"] for p in ckpt.history] == [1, 2]
    assert "val" in ckpt.history[-1] and ckpt.m is not None
    assert ckpt.dataset == {"name": "tiny", "bytes": corpus.stat().st_size,
                            "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}


def test_cli_explains_a_missing_corpus(tmp_path):
    with pytest.raises(SystemExit, match="no such file"):
        train.main(["--corpus", str(tmp_path / "absent"), "--steps", "1"])
