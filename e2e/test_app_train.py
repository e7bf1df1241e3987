"""Training in the browser, end to end: on WebGPU (SwiftShader with the flag)
and on the WebAssembly CPU backend without it; the loss falls, the UI names the
backend, the GPU badge shows only while the GPU trains, a sample streams; a
model exported from the app round-trips through import and through the Python
reader, and a corrupt file is refused while the current model survives."""
import json
import math
import re

import numpy as np
from playwright.sync_api import expect

from appdriver import LN_VOCAB, configure, loss_table, open_app, sample, wait_state, wait_step
from tinygpt import checkpoint
from tinygpt.facts import FACTS
from tinygpt.train import evaluate, split

STEPS = 200
# SwiftShader takes about a second a step: fewer, from a fixed seed. At Tiny's shape with batch 2
# and context 32 the reference's last 20 of 80 steps average 3.26-3.35 over seeds 0-3, against the
# 4.05 assert_learned asks for.
GPU_STEPS = 80


def assert_learned(rows, steps: int):
    assert [r[0] for r in rows] == list(range(1, steps + 1)), "every step appears once, in order"
    assert all(math.isfinite(t) for _, t, _ in rows), "no NaN or infinite training loss"
    first = np.mean([t for _, t, _ in rows[:5]])
    last = np.mean([t for _, t, _ in rows[-20:]])
    # An untrained byte model starts near ln 256; "learned" means far below it and far below the start.
    assert abs(first - LN_VOCAB) < 0.3, f"start {first:.3f} should be near ln 256 = {LN_VOCAB:.3f}"
    assert last < LN_VOCAB - 1.5, f"mean loss of the last 20 steps {last:.3f} is not well below ln 256"
    vals = [v for _, _, v in rows if v is not None]
    assert vals and all(math.isfinite(v) for v in vals) and vals[-1] < LN_VOCAB - 1.5


def test_tiny_trains_on_webgpu(open_page, browser):
    page = open_app(open_page, browser, seed=20261205).page
    expect(page.locator("#caps")).to_have_attribute("data-webgpu", "yes")
    # SwiftShader runs the GPU kernels on two CPU cores: Tiny's shape at a small batch and context.
    # Best available would choose the CPU over SwiftShader (test_app_best.py): WebGPU, chosen.
    configure(page, steps=GPU_STEPS, eval_every=100, save_every=100, batch=2, block=32, backend="webgpu")
    page.click("#btn-start")
    wait_state(page, "training", 120)
    expect(page.locator("#stat-backend")).to_contain_text("WebGPU")
    badge = page.locator("#gpu-badge")
    wait_step(page, 3, 120)
    expect(badge).to_be_visible()
    expect(badge).to_have_text(re.compile(r"^GPU active · [\d.]+k? tok/s$"))
    wait_state(page, "ready", 540)
    expect(badge).to_be_hidden()
    assert_learned(loss_table(page), GPU_STEPS)
    text, updates = sample(page, "ROMEO:", temperature=0.8, top_k=40, length=16, timeout=120)
    assert text.startswith("ROMEO:") and len(text) > len("ROMEO:")
    assert updates > 4, "the sample appeared piece by piece"
    expect(page.locator("#sample-tps")).to_contain_text("tok/s")


def test_tiny_trains_on_cpu_then_export_import_and_corrupt_file(open_page, browser_no_webgpu, dist, tmp_path):
    visit = open_app(open_page, browser_no_webgpu, seed=20261203)  # the greedy bytes below depend on the weights
    page = visit.page
    expect(page.locator("#caps")).to_have_attribute("data-webgpu", "no")
    configure(page, steps=STEPS, eval_every=50, save_every=100)
    page.click("#btn-start")
    wait_state(page, "training", 60)
    expect(page.locator("#stat-backend")).to_contain_text("WebAssembly")
    wait_step(page, 5, 60)
    expect(page.locator("#gpu-badge")).to_be_hidden()
    wait_state(page, "ready", 180)
    rows = loss_table(page)
    assert_learned(rows, STEPS)

    text, updates = sample(page, "ROMEO:", temperature=0.8, top_k=40, length=200, timeout=60)
    assert text.startswith("ROMEO:") and len(text) > 100 and updates > 2, "the sample streamed"
    # The int8 lever's held-out check passed on the trained weights: the sample ran on int8.
    expect(page.locator("#sample-tps")).to_contain_text("+int8")
    expect(page.locator("#pills .pill-lever", has_text="+int8")).to_have_count(1)
    greedy, _ = sample(page, "KING:", temperature=0, top_k=0, length=40, timeout=60)

    with page.expect_download() as download:
        page.click("#btn-export")
    exported = tmp_path / download.value.suggested_filename
    download.value.save_as(exported)
    assert exported.suffix == ".tinygpt"

    # The Python reader loads the file: same shape, step and history; its loss on the same
    # validation windows is the app's up to float32 rounding (WebAssembly against numpy).
    ck = checkpoint.load(exported)
    assert (ck.config.n_layer, ck.config.n_embd, ck.config.block_size) == (2, 64, 64)
    assert ck.trainer["step"] == STEPS and ck.m is not None
    assert [p["step"] for p in ck.history] == [r[0] for r in rows]
    app_val = ck.history[-1]["val"]
    assert f"{app_val:.4f}" == f"{rows[-1][2]:.4f}", "the table shows the saved validation loss"
    first = json.loads((dist / "corpora" / "manifest.json").read_text())["corpora"][0]  # the default choice
    _, val = split((dist / "corpora" / first["file"]).read_bytes())
    py_val = evaluate(ck.config, ck.params, val, FACTS["app"]["eval_batches"], ck.trainer["config"]["batch_size"])
    assert abs(py_val - app_val) <= FACTS["conformance"]["first_loss_rel"] * py_val, (py_val, app_val)

    # A corrupt file and a foreign one are refused; the model in the tab is untouched.
    good = exported.read_bytes()
    for name, data in [("cut.tinygpt", good[: len(good) // 2]), ("notes.tinygpt", b"hello, not a model\n" * 10)]:
        bad = tmp_path / name
        bad.write_bytes(data)
        before = page.locator("#messages .message-error").count()
        page.set_input_files("#import-file", str(bad))
        expect(page.locator("#messages .message-error")).to_have_count(before + 1, timeout=15_000)
        expect(page.locator("#messages .message-error").first).to_contain_text(f"{name} was refused")
        expect(page.locator("#messages .message-error").first).to_contain_text("The current model is unchanged")
    assert sample(page, "KING:", temperature=0, top_k=0, length=40, timeout=60)[0] == greedy

    # Reset, import the export: the same model answers the same greedy prompt. An imported model
    # has no corpus to check int8 on, so it samples on f32, and this seeded run's 40 greedy bytes
    # are the same on both paths (no near tie among them: the run is deterministic).
    page.click("#btn-reset")
    wait_state(page, "empty", 15)
    page.set_input_files("#import-file", str(exported))
    wait_state(page, "ready", 30)
    expect(page.locator("#stat-step")).to_contain_text(str(STEPS))
    assert sample(page, "KING:", temperature=0, top_k=0, length=40, timeout=60)[0] == greedy
    expect(page.locator("#sample-tps")).not_to_contain_text("+int8")

    # With a trained model, saved runs, stats and samples on it, the page still fits a phone.
    page.set_viewport_size({"width": 360, "height": 740})
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    assert visit.problems() == []
