"""The WebNN sampling lever where no browser here runs WebNN (content/docs/browser-notes.md):
without navigator.ml, and with Chromium's WebNN flag, whose createContext throws
NotSupportedError on Linux, the lever's verdict says why it is off, no +WebNN pill shows, and a
model samples on the backend as before, with no console error. The lever's graph, gate and
mid-sample fallback are tested on a CPU stand-in for the API (webapp/levers/webnn/webnn.test.ts)."""
import pytest
from playwright.sync_api import expect

from appdriver import sample, start_on_cpu, wait_finished

LEVER = "#caps-gate li[data-lever=webnn]"


@pytest.mark.parametrize("flag, why", [(False, "this browser has no WebNN"), (True, "WebNN gave no context")],
                         ids=["no navigator.ml", "WebNN flag"])
def test_sampling_stays_on_the_backend_when_webnn_is_off(open_page, browser_no_webgpu, browser_webnn_flag, flag, why):
    visit = start_on_cpu(open_page, browser_webnn_flag if flag else browser_no_webgpu, seed=5, steps=2, eval_every=100, save_every=100)
    page = visit.page
    expect(page.locator(LEVER)).to_have_attribute("data-verdict", "fail")
    expect(page.locator(LEVER)).to_contain_text(why)
    wait_finished(page, 2)
    text, _ = sample(page, "To be", temperature=0.8, top_k=0, length=40, timeout=60, seed=9)
    assert len(text.encode()) >= len("To be") + 1
    expect(page.locator("#sample-out")).to_have_attribute("data-tokens", "40")
    expect(page.locator("#sample-tps")).to_contain_text("WebAssembly")
    expect(page.locator("#sample-tps")).not_to_contain_text("WebNN")
    expect(page.locator("#pills")).not_to_contain_text("+WebNN")
    assert visit.problems() == []
