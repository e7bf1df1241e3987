"""tests/fixtures/golden_tiny.json is exactly what `python -m tests.oracles.golden` generates, and sane."""
import base64
import json
import math

import numpy as np
import pytest

from tests.oracles import golden
from tinygpt import model

COMMITTED = json.loads(golden.PATH.read_text())


def floats(b64):
    return np.frombuffer(base64.b64decode(b64), "<f4")


def assert_same(expected, actual, where="golden", tol=None):
    """Equal structure, ints and strings; floats nearly (tol: an absolute
    tolerance, else relative 1e-4), because the BLAS on another machine may sum
    in another order, and over 20 steps float32 rounding moves a gradient norm
    by up to ~1e-5. Base64 float arrays likewise, except the initial
    parameters, which only a seeded RNG makes."""
    if isinstance(expected, dict):
        assert list(expected) == list(actual), where
        for key in expected:
            assert_same(expected[key], actual[key], f"{where}.{key}", tol)
    elif isinstance(expected, list):
        assert len(expected) == len(actual), where
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{where}[{i}]", tol)
    elif isinstance(expected, float):
        assert isinstance(actual, float), where
        assert actual == pytest.approx(expected, rel=0 if tol else 1e-4, abs=tol or 1e-7), where
    elif isinstance(expected, str) and where.endswith((".f32", "logits_step0")):
        np.testing.assert_allclose(floats(actual), floats(expected), rtol=1e-5, atol=1e-7, err_msg=where)
    else:
        assert expected == actual, where


def assert_same_final_params(expected, actual, noise):
    """Adam divides by the gradient's own size, so a reordered sum perturbs small
    gradients' steps by a lot relatively: judge each tensor against its norm."""
    assert list(expected) == list(actual)
    for name, e in expected.items():
        if name not in noise:
            assert_same(e, actual[name], f"final.params.{name}", tol=1e-4 * e["l2"])


def test_committed_fixture_is_what_the_command_generates():
    generated = json.loads(golden.dumps(golden.generate()))
    expected = json.loads(golden.PATH.read_text())
    noise = expected["final"]["noise_tensors"]
    assert noise == generated["final"]["noise_tensors"] and noise
    assert_same_final_params(expected["final"].pop("params"), generated["final"].pop("params"), noise)
    assert_same(expected, generated)


def test_fixture_is_small_and_self_consistent():
    assert golden.PATH.stat().st_size < 300_000
    config = model.GPTConfig.from_dict(COMMITTED["config"])
    total = sum(t["size"] for t in COMMITTED["tensors"])
    assert total == COMMITTED["param_count"] == floats(COMMITTED["init_params"]).size == model.param_count(config)
    B, T = COMMITTED["train"]["batch_size"], config.block_size
    steps = COMMITTED["steps"]
    assert len(steps) == 20 and all(len(s["x"]) == len(s["y"]) == B * T for s in steps)
    # Near-uniform start (ln 256), learning by the end, float32 tracking float64 closely.
    assert abs(steps[0]["loss_f32"] - math.log(256)) < 0.05
    assert steps[-1]["loss_f32"] < steps[0]["loss_f32"] - 1.0
    assert all(abs(s["loss_f32"] - s["loss_f64"]) < 1e-5 * s["loss_f64"] for s in steps)
    # Greedy choices are far from ties, so every engine must make the same ones.
    assert COMMITTED["sample"]["min_margin"] > 1e-3


def test_fixture_replays_through_a_fresh_forward_pass():
    config = model.GPTConfig.from_dict(COMMITTED["config"])
    params = model.unflatten(floats(COMMITTED["init_params"]), config)
    step0 = COMMITTED["steps"][0]
    x = np.array(step0["x"]).reshape(-1, config.block_size)
    y = np.array(step0["y"]).reshape(-1, config.block_size)
    _, loss, acts = model.forward(config, params, x, y)
    assert loss == pytest.approx(step0["loss_f32"], rel=1e-6)
    grads = model.backward(config, params, acts)
    for name, g in COMMITTED["grads_step0"].items():
        np.testing.assert_allclose(grads[name].ravel(), floats(g["f32"]), rtol=1e-4, atol=1e-7, err_msg=name)
