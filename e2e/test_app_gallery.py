"""The gallery: its dialog lists the manifest's models; a model downloads with progress, is
checked and cached, loads with its card's sample settings and writes the card's sample again;
the cached copy loads with the network blocked, a damaged one is fetched again, a throttled
download cancels, a failed one keeps the current model; the dialog keeps focus, closes on
Escape and fits a phone. Then: greedy sampling repeats the numpy reference's bytes on both
backends while the window slides, and a gallery model trains further on a bundled text from
its weights, step and history (skipped, saying so, while the gallery is empty)."""
import json
import re

import pytest
from playwright.sync_api import expect

from appdriver import LN_VOCAB, loss_table, open_app, sample, wait_for, wait_state
from tests.oracles import conformance
from tinygpt import checkpoint

MORE_STEPS = 4
FILES = "**/gallery/*.tinygpt"
CACHED_BYTES = """async () => {
    const cache = await caches.open('tinygpt-gallery');
    return Promise.all((await cache.keys()).map(async (k) => [k.url, (await (await cache.match(k)).arrayBuffer()).byteLength]));
}"""
DAMAGE_CACHE = """async () => {
    const cache = await caches.open('tinygpt-gallery');
    for (const k of await cache.keys()) await cache.put(k, new Response(new Uint8Array([84, 71, 80, 84, 0])));
}"""


def gallery_models(dist) -> list[dict]:
    models = json.loads((dist / "gallery" / "manifest.json").read_text())["models"]
    if not models:
        pytest.skip("gallery/manifest.json lists no models yet")
    return models


def load_state(page) -> dict:
    box = page.locator("#gallery-load")
    return {k: box.get_attribute(f"data-{k}") for k in ("state", "model", "source", "received")}


def choose(page, model: dict, until: str = "loaded", timeout: float = 60):
    """Opens the gallery, presses the model's Load and waits for the load to reach `until`."""
    if not page.locator("#gallery").is_visible():
        page.click("#btn-gallery")
    page.click(f'.gallery-card[data-model="{model["id"]}"] .gallery-load-model')
    wait_for(lambda: load_state(page)["model"] == model["id"] and load_state(page)["state"] == until, timeout,
             f"the gallery load of {model['id']} to be {until}", page)


def load(page, model: dict):
    """The model, loaded from the gallery: the dialog closed, the app ready."""
    choose(page, model)
    expect(page.locator("#gallery")).to_be_hidden()
    wait_state(page, "ready", 60)


def test_the_dialog_lists_the_models_keeps_focus_and_closes_on_escape(open_page, browser_no_webgpu, dist):
    models = gallery_models(dist)
    page = open_app(open_page, browser_no_webgpu).page
    opener = page.locator("#btn-gallery")
    expect(opener).to_be_visible()
    opener.click()
    dialog = page.locator("#gallery")
    expect(dialog).to_be_visible()
    cards = page.locator(".gallery-card")
    expect(cards).to_have_count(len(models))
    for card, m in zip(cards.all(), models):
        assert card.get_attribute("data-model") == m["id"]
        expect(card.locator("h3")).to_have_text(m["name"])
        expect(card).to_contain_text(m["blurb"])
        expect(card).to_contain_text(m["corpus"]["licence"])
        expect(card).to_contain_text(f"{m['val_loss']:.4f}")
        expect(card.locator(".gallery-sample pre")).to_have_text(m["sample"]["prompt"] + m["sample"]["text"])
    # Tab and Shift+Tab go round the dialog's controls, never out of it.
    stops = dialog.locator("button:not(:disabled), summary").count()
    inside = "() => document.querySelector('#gallery').contains(document.activeElement)"
    for key in ["Tab"] * (stops + 2) + ["Shift+Tab"] * (stops + 2):
        page.keyboard.press(key)
        assert page.evaluate(inside), f"focus left the dialog after {key}"
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()


def test_the_dialog_fits_a_phone(open_page, browser_no_webgpu, dist):
    gallery_models(dist)
    page = open_app(open_page, browser_no_webgpu).page
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("#btn-gallery")
    dialog = page.locator("#gallery")
    expect(dialog).to_be_visible()
    box = dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert page.evaluate("() => { const d = document.querySelector('#gallery'); return d.scrollWidth <= d.clientWidth; }")
    for card in page.locator(".gallery-card").all():
        c = card.bounding_box()
        assert c["x"] >= box["x"] and c["x"] + c["width"] <= box["x"] + box["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_model_downloads_with_progress_samples_its_card_and_loads_again_offline(open_page, browser_no_webgpu, dist):
    model = gallery_models(dist)[0]
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.select_option("#backend", "wasm")
    load(page, model)
    # The progress shown came from the download itself: every byte was counted on its way in.
    assert load_state(page) == {"state": "loaded", "model": model["id"], "source": "network", "received": str(model["bytes"])}
    expect(page.locator("#messages")).to_contain_text(f"Loaded {model['name']}")
    expect(page.locator("#btn-sample")).to_be_focused()
    s = model["sample"]
    expect(page.locator("#prompt")).to_have_value(s["prompt"])
    # The fields hold the card's settings: Generate writes the card's sample again.
    page.click("#btn-sample")
    out = page.locator("#sample-out")
    wait_for(lambda: out.get_attribute("data-done") == "yes", 120, "the sample to finish", page)
    assert out.text_content() == s["prompt"] + s["text"]
    assert page.evaluate(CACHED_BYTES) == [[f"{visit.base}/gallery/{model['file']}?sha256={model['sha256']}", model["bytes"]]]

    # After a reload, with the files out of reach, it comes from the cache.
    page.reload()
    asked = []
    page.route(FILES, lambda route: (asked.append(route.request.url), route.abort()))
    wait_state(page, "empty", 30)
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=30_000)
    page.select_option("#backend", "wasm")
    load(page, model)
    assert load_state(page)["source"] == "cache" and asked == []
    text, _ = sample(page, "The ", temperature=0.8, top_k=40, length=40, timeout=60, seed=3)
    assert text.startswith("The ") and len(text) > 30

    # A cached copy that no longer matches its hash is thrown away and downloaded again.
    page.unroute(FILES)
    page.evaluate(DAMAGE_CACHE)
    load(page, model)
    assert load_state(page)["source"] == "network"
    expect(page.locator("#gallery-load-text")).to_contain_text("loaded")
    assert page.evaluate(CACHED_BYTES)[0][1] == model["bytes"]
    assert visit.problems() == []


def test_a_throttled_download_cancels_and_a_second_click_starts_nothing(open_page, browser_no_webgpu, dist):
    models = gallery_models(dist)
    model = max(models, key=lambda m: m["bytes"])
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    asked = []
    page.on("request", lambda r: r.url.endswith(".tinygpt") and asked.append(r.url))
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": 20_000, "uploadThroughput": -1})
    page.click("#btn-gallery")
    page.click(f'.gallery-card[data-model="{model["id"]}"] .gallery-load-model')
    wait_for(lambda: load_state(page)["state"] == "downloading" and int(load_state(page)["received"]) > 0, 60,
             "the first bytes", page)
    expect(page.locator("#gallery-load-text")).to_contain_text(re.compile(r"of [\d.]+ MiB · [\d.]+ KiB/s"))
    # One download at a time: every Load is disabled, and pressing another does nothing.
    for button in page.locator(".gallery-load-model").all():
        expect(button).to_be_disabled()
    page.locator(".gallery-load-model").first.click(force=True)
    page.click("#gallery-cancel")
    wait_for(lambda: load_state(page)["state"] == "cancelled", 30, "the download to be cancelled", page)
    assert 0 < int(load_state(page)["received"]) < model["bytes"]
    expect(page.locator("#gallery-load-text")).to_contain_text("cancelled; the current model is unchanged")
    assert len(asked) == 1
    assert page.evaluate(CACHED_BYTES) == []
    assert page.locator("#app").get_attribute("data-state") == "empty"
    for button in page.locator(".gallery-load-model").all():
        expect(button).to_be_enabled()
    assert visit.problems() == []


def test_a_failed_or_damaged_download_keeps_the_current_model(open_page, browser_no_webgpu, dist):
    models = gallery_models(dist)
    first = models[0]
    other = next(m for m in models if m["config"] != first["config"])
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    load(page, first)
    shape = page.locator("#loaded-shape").text_content()
    page.route(f"**/gallery/{other['file']}", lambda route: route.fulfill(status=500, body="no"))
    choose(page, other, until="failed")
    expect(page.locator("#gallery-load-text")).to_contain_text("could not be downloaded (HTTP 500); the current model is unchanged")
    page.unroute(f"**/gallery/{other['file']}")
    page.route(f"**/gallery/{other['file']}", lambda route: route.fulfill(status=200, body=b"\0" * other["bytes"]))
    choose(page, other, until="failed")
    expect(page.locator("#gallery-load-text")).to_contain_text("arrived damaged")
    page.keyboard.press("Escape")
    expect(page.locator("#gallery")).to_be_hidden()
    assert page.locator("#loaded-shape").text_content() == shape
    assert page.locator("#app").get_attribute("data-state") == "ready"
    assert page.evaluate(CACHED_BYTES) == [[f"{visit.base}/gallery/{first['file']}?sha256={first['sha256']}", first["bytes"]]]
    # The 500 shows in the browser's console and the fixture's list; nothing else went wrong.
    assert [p for p in visit.problems() if "500" not in p] == []


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
    load(page, model)
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
    load(page, model)
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
    assert start == model["training"]["steps"] and saved.history[-1]["step"] == start
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    load(page, model)

    # The size controls show the loaded model's shape; Continue training trains that model.
    expect(page.locator("#loaded-shape")).to_contain_text(f"at step {start}")
    expect(page.locator(f"input[name=preset][value={model['preset']}]")).to_be_checked()

    page.check("input[name=corpus-source][value=bundled]")
    page.select_option("#corpus-select", model["corpus"]["id"])
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
