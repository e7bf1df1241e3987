"""Estimates from the real thing: a shape beyond this device's limits is
flagged before Start with the limit named (WebAssembly memory on the CPU, the
GPU's largest buffer on WebGPU), and a run whose measured time per step makes
it longer than an hour says how long before it starts."""
import re

from playwright.sync_api import expect

from appdriver import open_app
from tinygpt import model

# 24 layers of 1024 (the custom maxima for layers and width): 302M parameters.
BIG = {"c-n_layer": 24, "c-n_embd": 1024, "c-n_head": 16, "c-block_size": 1024}


def choose_big(page):
    page.check("input[name=preset][value=custom]")
    for field, value in BIG.items():
        page.fill(f"#{field}", str(value))


def test_a_shape_beyond_webassembly_memory_is_flagged_before_start(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    note = page.locator("#start-note")
    choose_big(page)
    expect(note).to_be_visible()
    expect(note).to_have_attribute("data-problem", "yes")
    expect(note).to_contain_text(re.compile(r"On the CPU this needs [\d.]+ GiB of WebAssembly memory, more than one WebAssembly memory can hold \(4\.00 GiB\)"))
    # Back to a size that fits, the flag goes.
    page.check("input[name=preset][value=tiny]")
    expect(note).to_be_hidden()
    assert visit.problems() == []


def test_a_shape_beyond_the_gpus_largest_buffer_is_flagged_before_start(open_page, browser):
    visit = open_app(open_page, browser)
    page = visit.page
    limits = page.evaluate("""async () => {
        const a = await navigator.gpu.requestAdapter();
        return [a.limits.maxBufferSize, a.limits.maxStorageBufferBindingSize];
    }""")
    page.select_option("#backend", "webgpu")
    choose_big(page)
    note = page.locator("#start-note")
    expect(note).to_have_attribute("data-problem", "yes")
    name = "maxBufferSize" if limits[0] < limits[1] else "maxStorageBufferBindingSize"
    expect(note).to_contain_text(f"more than this GPU's largest buffer ({name}: {min(limits) // 2**20} MiB)")
    needed = int(re.search(r"Too large for this GPU: its parameters buffer needs (\d+) MiB", note.inner_text())[1])
    # The parameters, each tensor on the adapter's binding alignment.
    params = model.param_count(model.GPTConfig(vocab_size=256, n_layer=24, n_embd=1024, n_head=16, block_size=1024))
    assert 0 <= needed - params * 4 / 2**20 < 2
    assert visit.problems() == []


def test_a_run_over_an_hour_says_so_before_it_starts(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.check("input[name=preset][value=tiny]")
    page.select_option("#backend", "wasm")
    page.fill("#steps", "1000000")
    expect(page.locator('[data-preset-speed="tiny"]')).to_contain_text("per step here", timeout=60_000)
    note = page.locator("#start-note")
    expect(note).to_contain_text(re.compile(r"^A new run of 1000000 steps takes about \d+ h \d+ min here, at ≈ [\d.]+ ms a step\.$"))
    expect(note).to_have_attribute("data-problem", "no")
    page.fill("#steps", "100")
    expect(note).to_be_hidden()
    assert visit.problems() == []
