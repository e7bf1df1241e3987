"""Best available means fastest: with SwiftShader as the WebGPU adapter (a
software renderer, which says so in isFallbackAdapter), the app trains on the
CPU and says why in one line; WebGPU can still be chosen, and without an
adapter there is nothing to explain."""
from playwright.sync_api import expect

from appdriver import configure, open_app, wait_finished, wait_state


def test_best_available_passes_over_a_software_gpu(open_page, browser):
    visit = open_app(open_page, browser, seed=5)
    page = visit.page
    expect(page.locator("#caps")).to_have_attribute("data-webgpu", "yes")
    note = page.locator("#backend-note")
    expect(note).to_be_visible(timeout=30_000)
    expect(note).to_contain_text("is a software renderer")
    expect(note).to_contain_text("choose WebGPU under Backend to use the GPU anyway")
    expect(page.locator("#backend option[value=auto]")).to_have_text("Best available: WebAssembly (CPU)")
    assert page.input_value("#backend") == "auto"
    configure(page, steps=3, eval_every=3, save_every=3)
    page.click("#btn-start")
    wait_state(page, "training", 60)
    expect(page.locator("#stat-backend")).to_contain_text("WebAssembly")
    wait_finished(page, 3)

    # Chosen by name, the GPU trains.
    configure(page, steps=1, eval_every=1, save_every=1, backend="webgpu", batch=2, block=32)
    page.click("#btn-start")
    expect(page.locator("#stat-backend")).to_contain_text("WebGPU", timeout=300_000)
    wait_finished(page, 1, timeout=300)
    assert visit.problems() == []


def test_without_an_adapter_best_available_is_the_cpu_and_needs_no_reason(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    expect(page.locator("#backend option[value=auto]")).to_have_text("Best available: WebAssembly (CPU)", timeout=30_000)
    expect(page.locator("#backend-note")).to_be_hidden()
    assert visit.problems() == []
