"""Best available means fastest: with SwiftShader as the WebGPU adapter (a
software renderer, which says so in isFallbackAdapter), the app trains on the
CPU and says why in one line; WebGPU can still be chosen, and without an
adapter there is nothing to explain. The pills name the path that runs: the
backend chosen (or what Best available found) and only its own levers, then
the loaded model's."""
import re

from playwright.sync_api import expect

from appdriver import configure, open_app, wait_finished


def expect_pills(page, backend: list[str], levers: list[str]):
    expect(page.locator("#pills .pill-backend")).to_have_text(backend)
    expect(page.locator("#pills .pill-lever")).to_have_text(levers)


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
    # Before a run: the CPU's path (its threads where the page has more than one core, and the
    # relaxed-SIMD lever its gate passed), never WebGPU; choosing WebGPU shows its path instead.
    cpu = ["WASM", "+threads"] if page.evaluate("navigator.hardwareConcurrency") > 1 else ["WASM"]
    expect(page.locator("#caps-gate li[data-lever=relaxed-simd]")).to_have_attribute("data-verdict", "pass")
    expect_pills(page, cpu, ["+relaxed-simd"])
    # Each size's memory is what the chosen backend's allocation code would hold.
    memory = page.locator('[data-preset-memory="tiny"]')
    expect(memory).to_have_text(re.compile(r"^[\d.]+ MiB while training \(WASM\)$"))
    page.select_option("#backend", "webgpu")
    expect_pills(page, ["WebGPU"], [])
    expect(memory).to_have_text(re.compile(r"^[\d.]+ MiB while training \(WebGPU\)$"))
    page.select_option("#backend", "wasm")
    expect_pills(page, cpu, ["+relaxed-simd"])
    configure(page, steps=3, eval_every=3, save_every=3)
    page.click("#btn-start")
    # What the run shows while it trains and after: a few steps on a fast CPU can pass between two
    # looks at the page, so its state is no marker of its start.
    expect(page.locator("#stat-backend")).to_contain_text("WebAssembly", timeout=60_000)
    expect(page.locator("#stat-backend")).to_contain_text(re.compile(r"holds [\d.]+ MiB"))
    expect_pills(page, cpu, ["+relaxed-simd"])
    wait_finished(page, 3)

    # Chosen by name, the GPU trains.
    configure(page, steps=1, eval_every=1, save_every=1, backend="webgpu", batch=2, block=32)
    page.click("#btn-start")
    expect(page.locator("#stat-backend")).to_contain_text("WebGPU", timeout=300_000)
    expect_pills(page, ["WebGPU"], [])
    wait_finished(page, 1, timeout=300)

    # WebAssembly chosen on a machine with WebGPU: the pills follow the run, not the adapter.
    configure(page, steps=2, eval_every=2, save_every=2, backend="wasm")
    page.click("#btn-start")
    expect(page.locator("#stat-backend")).to_contain_text("WebAssembly", timeout=60_000)
    expect_pills(page, cpu, ["+relaxed-simd"])
    wait_finished(page, 2)
    assert visit.problems() == []


def test_without_an_adapter_best_available_is_the_cpu_and_needs_no_reason(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    expect(page.locator("#backend option[value=auto]")).to_have_text("Best available: WebAssembly (CPU)", timeout=30_000)
    expect(page.locator("#backend-note")).to_be_hidden()
    assert visit.problems() == []
