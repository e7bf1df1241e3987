"""The app page's shell: the worker starts and answers, and capability
detection reports the WebGPU adapter exactly when Chromium offers one."""
from playwright.sync_api import expect

from tinygpt.facts import FACTS


def _open_app(open_page, browser):
    visit = open_page(browser, "/app/")
    assert visit.response.status == 200
    page = visit.page
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=20_000)
    expect(page.locator("#caps[data-webgpu=yes], #caps[data-webgpu=no]")).to_have_count(1, timeout=20_000)
    return visit


def test_worker_answers_and_webgpu_adapter_is_shown(open_page, browser):
    visit = _open_app(open_page, browser)
    page = visit.page
    assert page.evaluate("crossOriginIsolated") is True
    caps = page.locator("#caps")
    expect(caps).to_have_attribute("data-webgpu", "yes")
    expect(page.locator("#caps-summary")).to_contain_text("WebGPU is available")
    # SwiftShader offers at least one optional feature; the list must show what the adapter reported.
    reported = page.evaluate("""async () => {
        const a = await navigator.gpu.requestAdapter();
        return [...a.features].sort();
    }""")
    features_text = page.locator("#caps-features").inner_text()
    for feature in reported:
        assert feature in features_text
    # With WebGPU chosen, the pills name it and a GPU lever's pill shows exactly when its gate
    # passed here; detected features of levers with no verdict (none of the GPU levers is built
    # yet) are listed as available, not used.
    page.select_option("#backend", "webgpu")
    expect(page.locator("#pills .pill-backend")).to_have_text("WebGPU")
    verdicts = {li.get_attribute("data-lever"): li.get_attribute("data-verdict")
                for li in page.locator("#caps-gate li").all()}
    passed = [lv["pill"] for lv in FACTS["levers"] if lv["backend"] == "webgpu" and verdicts.get(lv["id"]) == "pass"]
    assert sorted(page.locator("#pills .pill-lever").all_inner_texts()) == sorted(passed)
    unused = {lv["feature"] for lv in FACTS["levers"] if lv["feature"] in reported and lv["id"] not in verdicts}
    if unused:
        unused_text = page.locator("#caps-unused").inner_text()
        assert all(f in unused_text for f in unused)
    assert visit.problems() == []


def test_no_webgpu_without_the_flag(open_page, browser_no_webgpu):
    visit = _open_app(open_page, browser_no_webgpu)
    page = visit.page
    expect(page.locator("#caps")).to_have_attribute("data-webgpu", "no")
    expect(page.locator("#caps-summary")).to_contain_text("No WebGPU")
    # Served cross-origin isolated, so the CPU path can use threads (where there is more than one core) and says so.
    threads = page.evaluate("navigator.hardwareConcurrency") > 1
    expect(page.locator("#pills .pill-backend")).to_have_text(["WASM", "+threads"] if threads else ["WASM"])
    # Chromium has relaxed SIMD, and the worker's gate lets it in: its pill follows from the verdict.
    expect(page.locator("#caps-gate li[data-lever=relaxed-simd]")).to_have_attribute("data-verdict", "pass")
    expect(page.locator("#pills .pill-lever")).to_have_text(["+relaxed-simd"])
    # Each pill opens its explainer, embedded in the page.
    page.locator("#pills .pill-backend").first.click()
    expect(page.locator(".explainer[data-pill=wasm]")).to_be_visible()
    assert page.locator("#caps-features").count() == 0
    assert visit.problems() == []


def test_app_fits_a_phone_and_controls_are_labelled(open_page, browser_no_webgpu):
    visit = _open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.set_viewport_size({"width": 360, "height": 740})
    assert page.evaluate("document.documentElement.scrollWidth") <= 360, "the page scrolls sideways on a phone"
    # Every visible form control has an accessible name (a label, aria-label or text).
    unnamed = page.evaluate("""() => [...document.querySelectorAll('#app input, #app select, #app textarea, #app button')]
        .filter(e => e.offsetParent !== null || e.type === 'file')
        .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
        .map(e => e.id || e.outerHTML.slice(0, 60))""")
    assert unnamed == []
    # Keyboard: Tab reaches the Start button.
    page.locator("#steps").focus()
    for _ in range(40):
        if page.evaluate("document.activeElement.id") == "btn-start":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "btn-start"
