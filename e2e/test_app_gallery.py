"""A gallery model loads in the app and samples, greedy sampling repeats the
numpy reference's bytes on both backends while the window slides, and it trains
further on a bundled text from its weights, step and history (skipped, saying
so, while the gallery is empty)."""
import json
import re

import pytest
from playwright.sync_api import expect

from appdriver import LN_VOCAB, loss_table, open_app, sample, wait_for, wait_state
from tests.oracles import conformance
from tinygpt import checkpoint

MORE_STEPS = 4


def gallery_models(dist) -> list[dict]:
    models = json.loads((dist / "gallery" / "manifest.json").read_text())["models"]
    if not models:
        pytest.skip("gallery/manifest.json lists no models yet")
    return models


def test_gallery_model_loads_and_samples(open_page, browser_no_webgpu, dist):
    models = gallery_models(dist)
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    expect(page.locator("#gallery")).to_be_visible()
    page.select_option("#gallery-select", models[0]["id"])
    page.click("#btn-gallery")
    wait_state(page, "ready", 60)
    expect(page.locator("#messages")).to_contain_text(f"Loaded {models[0]['title']}")
    text, updates = sample(page, "The ", temperature=0.8, top_k=40, length=60, timeout=60)
    assert text.startswith("The ") and len(text) > 30 and updates > 2
    assert visit.problems() == []


@pytest.mark.parametrize("backend", ["wasm", "webgpu"])
def test_greedy_sampling_repeats_the_reference_while_the_window_slides(open_page, browser, browser_no_webgpu, dist, backend):
    path, prompt, n = conformance.SAMPLE
    model = next(m for m in gallery_models(dist) if f"gallery/{m['file']}" == path)
    saved = checkpoint.load(dist / "gallery" / model["file"])
    want = conformance.greedy_sample(saved.config, saved.params, prompt, n)
    assert want["min_margin"] > 1e-3, "the reference's choices come close to a tie: choose another prompt"
    visit = open_app(open_page, browser if backend == "webgpu" else browser_no_webgpu)
    page = visit.page
    page.select_option("#backend", backend)
    page.select_option("#gallery-select", model["id"])
    page.click("#btn-gallery")
    wait_state(page, "ready", 60)
    expect(page.locator("#stat-backend")).to_contain_text("WebGPU" if backend == "webgpu" else "WebAssembly")
    sample(page, prompt.decode(), temperature=0, top_k=0, length=n, timeout=120)
    assert page.locator("#sample-out").text_content() == bytes(want["prompt"] + want["tokens"]).decode()
    where = "WebGPU.*, KV cache, chosen on the GPU" if backend == "webgpu" else "WebAssembly.*, KV cache"
    expect(page.locator("#sample-tps")).to_contain_text(re.compile(rf"^{n} tokens · [\d.]+k? tok/s · {where} · seed \d+$"))
    assert visit.problems() == []


def test_a_seed_gives_the_same_text_again_a_tiny_top_p_is_greedy_and_copy_takes_the_text(open_page, browser_no_webgpu, dist, site_url):
    model = gallery_models(dist)[0]
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site_url)
    page.select_option("#gallery-select", model["id"])
    page.click("#btn-gallery")
    wait_state(page, "ready", 60)
    hot = dict(temperature=1.2, top_k=0, length=48, timeout=60)
    first, _ = sample(page, "The ", seed=7, **hot)
    expect(page.locator("#sample-tps")).to_contain_text(re.compile(r"· seed 7$"))
    assert sample(page, "The ", seed=7, **hot)[0] == first
    assert sample(page, "The ", seed=8, **hot)[0] != first
    # A blank seed draws one and says which: it gives that text again.
    drawn, _ = sample(page, "The ", **hot)
    seed = int(re.search(r"seed (\d+)$", page.locator("#sample-tps").text_content())[1])
    assert sample(page, "The ", seed=seed, **hot)[0] == drawn
    # A nucleus this small keeps the most likely byte alone: the greedy text, at any temperature.
    greedy, _ = sample(page, "The ", temperature=0, top_k=0, length=48, timeout=60)
    assert sample(page, "The ", top_p=1e-6, seed=3, **hot)[0] == greedy
    page.click("#btn-sample-copy")
    expect(page.locator("#sample-copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == page.locator("#sample-out").text_content()
    page.fill("#top-p", "0")
    page.click("#btn-sample")
    expect(page.locator("#messages")).to_contain_text("Top-p must be a number above 0 up to 1.")
    assert visit.problems() == []


def test_gallery_model_trains_further_on_a_bundled_text(open_page, browser_no_webgpu, dist):
    model = gallery_models(dist)[0]
    saved = checkpoint.load((dist / "gallery" / model["file"]).read_bytes())
    start = saved.trainer["step"]
    assert start == model["steps"] and saved.history[-1]["step"] == start
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.select_option("#gallery-select", model["id"])
    page.click("#btn-gallery")
    wait_state(page, "ready", 60)

    # The size controls show the loaded model's shape; Continue training trains that model.
    expect(page.locator("#loaded-shape")).to_contain_text(f"at step {start}")
    expect(page.locator(f"input[name=preset][value={model['preset']}]")).to_be_checked()

    page.check("input[name=corpus-source][value=bundled]")
    page.select_option("#corpus-select", model["corpus"])
    page.fill("#steps", str(start + MORE_STEPS))
    page.fill("#eval-every", str(MORE_STEPS))
    page.fill("#save-every", str(MORE_STEPS))
    page.select_option("#backend", "wasm")
    page.click("#btn-resume")
    wait_for(lambda: page.locator("#save-status").get_attribute("data-step") == str(start + MORE_STEPS), 120,
             f"the checkpoint of step {start + MORE_STEPS}", page)
    wait_state(page, "ready", 60)
    expect(page.locator("#stat-step")).to_have_text(f"{start + MORE_STEPS} / {start + MORE_STEPS}")

    rows = loss_table(page)
    assert [r[0] for r in rows] == list(range(1, start + MORE_STEPS + 1)), "the new steps follow the file's"
    for (s, train, _), kept in zip(rows[:start], saved.history):
        assert s == kept["step"] and abs(train - kept["train"]) < 1e-3
    new = [train for s, train, _ in rows[start:]]
    # A fresh model would start near ln 256; a loss far below it means the weights came along.
    assert new[0] < 3.0 < LN_VOCAB, f"first new loss {new[0]:.3f}"
    assert rows[-1][2] is not None, "validated at the target step"

    # The continued run is a saved run like any other, and Reset returns to no model.
    entry = page.locator("#checkpoint-list li")
    expect(entry).to_have_count(1, timeout=30_000)
    expect(entry).to_contain_text(f"step {start + MORE_STEPS}")
    page.click("#btn-reset")
    wait_state(page, "empty", 30)
    expect(page.locator("#loaded-shape")).to_be_hidden()
    assert visit.problems() == []
