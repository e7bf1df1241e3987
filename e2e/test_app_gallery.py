"""A gallery model loads in the app and samples (skipped, saying so, while the
gallery is empty)."""
import json

import pytest
from playwright.sync_api import expect

from appdriver import open_app, sample, wait_state


def test_gallery_model_loads_and_samples(open_page, browser_no_webgpu, dist):
    models = json.loads((dist / "gallery" / "manifest.json").read_text())["models"]
    if not models:
        pytest.skip("gallery/manifest.json lists no models yet")
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    expect(page.locator("#gallery")).to_be_visible()
    page.select_option("#gallery-select", models[0]["id"])
    page.click("#btn-gallery")
    wait_state(page, "ready", 60)
    expect(page.locator("#messages")).to_contain_text(f"Loaded {models[0]['title']}")
    text, updates = sample(page, "The ", temperature=0.8, top_k=40, length=60, timeout=60)
    assert text.startswith("The ") and len(text) > 30 and updates > 5
    assert visit.problems() == []
