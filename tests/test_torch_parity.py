"""The numpy reference against the same model built from PyTorch's own layers and autograd.

torch is a test extra, never a runtime dependency: without it these tests are
skipped, visibly. Agreement is float32: rtol 1e-4, with an absolute floor of
1e-5 of the largest magnitude for entries that are nearly zero.
"""
import numpy as np
import pytest

from tinygpt import model, train

torch = pytest.importorskip("torch", reason="PyTorch not importable: parity with its autograd not checked here")
from tests.oracles.torch_model import adamw, torch_logits_cached, torch_loss  # noqa: E402

CONFIG = model.GPTConfig(vocab_size=256, n_layer=2, n_embd=32, n_head=4, block_size=16)


def setup():
    rng = np.random.default_rng(0)
    params = {k: (p + 0.05 * rng.standard_normal(p.shape)).astype(np.float32)
              for k, p in model.init_params(CONFIG, 1).items()}
    idx = rng.integers(0, 256, (3, CONFIG.block_size))
    return params, idx, rng.integers(0, 256, idx.shape)


def close(actual, expected, name, scale=None):
    expected = np.asarray(expected)
    scale = np.abs(expected).max() if scale is None else scale
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * scale, err_msg=name)


def test_logits_loss_and_every_gradient_match_torch():
    params, idx, targets = setup()
    logits, loss, acts = model.forward(CONFIG, params, idx, targets)
    grads = model.backward(CONFIG, params, acts)
    P = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    t_logits, t_loss = torch_loss(CONFIG, P, torch.tensor(idx), torch.tensor(targets))
    t_loss.backward()
    close(logits, t_logits.detach().numpy(), "logits")
    assert loss == pytest.approx(t_loss.item(), rel=1e-5)
    # A key bias's gradient is 0 in exact arithmetic (softmax ignores a per-row shift),
    # so both sides hold rounding noise: judge it against the largest gradient anywhere.
    scale = max(np.abs(P[name].grad.numpy()).max() for name in params)
    for name in params:
        close(grads[name], P[name].grad.numpy(), name, scale)


def test_torch_kv_cache_gives_every_position_the_references_logits():
    """bench_sample.py's PyTorch baseline decodes with this cache: it must be the same model."""
    params, idx, _ = setup()
    logits, _, _ = model.forward(CONFIG, params, idx[:1])
    P = {k: torch.tensor(v) for k, v in params.items()}
    cache = []
    got = [torch_logits_cached(CONFIG, P, torch.tensor(idx[:1, :5]), cache)[0]]
    got += [torch_logits_cached(CONFIG, P, torch.tensor(idx[:1, t:t + 1]), cache)[0] for t in range(5, CONFIG.block_size)]
    close(torch.cat(got).numpy(), logits[0], "cached logits")


def test_clipping_and_adamw_match_torch_given_the_same_gradients():
    # Same gradients in, so the optimizer is compared alone: a gradient that is 0 in
    # exact arithmetic (a key bias) has a rounding-noise sign Adam would amplify.
    params, idx, targets = setup()
    tc = train.TrainConfig(batch_size=3, lr=3e-3, warmup_steps=1, grad_clip=0.5)
    ours = {k: v.copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    P = {k: torch.tensor(p, requires_grad=True) for k, p in params.items()}
    opt = adamw(P.values(), tc)
    for step in (1, 2):
        _, _, acts = model.forward(CONFIG, ours, idx, targets)
        grads = model.backward(CONFIG, ours, acts)
        for name, g in grads.items():
            P[name].grad = torch.tensor(g)
        norm = train.clip_grad_norm(grads, tc.grad_clip)
        assert norm > tc.grad_clip  # so clipping is exercised
        t_norm = torch.nn.utils.clip_grad_norm_(list(P.values()), tc.grad_clip)
        assert norm == pytest.approx(t_norm.item(), rel=1e-5)
        train.adamw_update(ours, grads, m, v, step, tc.lr, tc)
        opt.step()
        for name in params:
            close(ours[name], P[name].detach().numpy(), name)
