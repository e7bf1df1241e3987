"""The app page's layout and accessibility: its own styles win over the base
look of controls and every control is a big enough target, at desk and phone
widths; on a desk the run (controls, stats, curve, sample) stays in view beside
the settings; a skip link; focus follows each run action; explainers close
with a visible button."""
import pytest
from playwright.sync_api import expect

from appdriver import configure, open_app, wait_for, wait_state, wait_step

DESK, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}

# Visible controls shorter or narrower than 24 px (WCAG 2.5.8); a radio or checkbox counts
# with its label, which takes its clicks, and a file input with its label (it is hidden).
SMALL_TARGETS = """() => [...document.querySelectorAll('#app button, #app input, #app select, #app textarea, #app summary')]
    .filter(e => e.getClientRects().length && !e.closest('[hidden], [popover]:not(:popover-open)'))
    .map(e => {
        const target = ['radio', 'checkbox', 'file'].includes(e.type) ? e.closest('label') : e;
        const r = target.getBoundingClientRect();
        return [e.id || e.name || e.className || e.tagName, Math.round(r.width), Math.round(r.height)];
    })
    .filter(([, w, h]) => w < 24 || h < 24)"""


def styles(page, selector: str) -> dict:
    return page.locator(selector).first.evaluate(
        "e => { const c = getComputedStyle(e); return {background: c.backgroundColor, radius: c.borderRadius}; }")


@pytest.mark.parametrize("viewport", [DESK, PHONE], ids=["desk", "phone"])
def test_start_and_pills_keep_their_own_look_and_targets_are_24px(open_page, browser_no_webgpu, viewport):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.set_viewport_size(viewport)
    accent = page.locator("#app").evaluate("e => getComputedStyle(e).getPropertyValue('--app-accent').trim()")
    solid = page.evaluate("c => { const e = document.createElement('i'); e.style.color = c; document.body.append(e);"
                          " const v = getComputedStyle(e).color; e.remove(); return v; }", accent)
    # The base button look (transparent, 6 px corners) must not override Start's or the pills' own.
    assert styles(page, "#btn-start")["background"] == solid
    pill = styles(page, "#pills .pill-backend")
    assert pill["background"] == solid and pill["radius"] == "999px"
    assert page.evaluate(SMALL_TARGETS) == []
    assert visit.problems() == []


def in_view(page, selector: str) -> bool:
    """The whole element lies within the viewport."""
    return page.locator(selector).evaluate(
        "e => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; }")


def test_on_a_desk_the_run_stays_in_view_beside_the_settings(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.set_viewport_size(DESK)
    configure(page, steps=2000, eval_every=50, save_every=100)
    page.evaluate("scrollTo(0, 0)")
    # Settings on the left, the run on the right.
    settings = page.locator("#setup").bounding_box()
    chart = page.locator("#loss-chart").bounding_box()
    assert chart["x"] >= settings["x"] + settings["width"]
    page.click("#btn-start")
    wait_state(page, "training", 60)
    wait_step(page, 3, 60)
    for selector in ("#btn-pause", "#stats", "#loss-chart", "#sample-out"):
        assert in_view(page, selector), f"{selector} is out of view"
    # Wherever the settings are scrolled, the run's controls, stats and curve and the start of the
    # sample stay in view (at the very end, the footer pushes the run up by its height).
    for target in ("#setup", "#data", ".site-footer"):
        page.locator(target).evaluate("e => e.scrollIntoView({block: 'start'})")
        for selector in ("#btn-pause", "#stats", "#loss-chart"):
            assert in_view(page, selector), f"{selector} is out of view with {target} scrolled into view"
        assert page.locator("#sample-out").evaluate("e => e.getBoundingClientRect().top < innerHeight - 40")
    page.click("#btn-pause")
    wait_state(page, "paused", 60)
    assert visit.problems() == []


@pytest.mark.parametrize("path", ["/docs/getting-started/", "/app/"])
def test_the_first_tab_offers_a_skip_link_past_the_header(open_page, browser_no_webgpu, path):
    visit = open_page(browser_no_webgpu, path)
    page = visit.page
    page.keyboard.press("Tab")
    link = page.locator(":focus")
    expect(link).to_have_class("skip-link")
    assert in_view(page, ".skip-link")
    target = link.get_attribute("href")
    page.keyboard.press("Enter")
    assert page.url.endswith(target)
    page.keyboard.press("Tab")
    assert page.evaluate("t => document.querySelector(t).contains(document.activeElement)", target)
    assert visit.problems() == []


def focused(page) -> str:
    return page.evaluate("document.activeElement.id || document.activeElement.tagName")


def test_focus_moves_to_the_next_control_after_each_run_action(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    configure(page, steps=2000, eval_every=50, save_every=100)
    page.focus("#btn-start")
    page.keyboard.press("Enter")
    wait_state(page, "training", 60)
    wait_for(lambda: focused(page) == "btn-pause", 10, "focus on Pause after Start")
    page.keyboard.press("Enter")
    wait_state(page, "paused", 60)
    wait_for(lambda: focused(page) == "btn-resume", 10, "focus on Continue training after Pause")
    page.keyboard.press("Enter")
    wait_state(page, "training", 60)
    wait_for(lambda: focused(page) == "btn-pause", 10, "focus on Pause after Continue training")
    page.keyboard.press("Tab")  # past Continue training, disabled, to Stop
    assert focused(page) == "btn-stop"
    page.keyboard.press("Enter")
    wait_state(page, "ready", 60)
    wait_for(lambda: focused(page) == "btn-start", 10, "focus on Start after Stop")
    page.fill("#length", "200")
    page.focus("#btn-sample")
    page.keyboard.press("Enter")
    wait_for(lambda: page.locator("#sample-out").get_attribute("data-done") == "yes", 60, "the sample to finish")
    wait_state(page, "ready", 30)
    wait_for(lambda: focused(page) == "btn-sample", 10, "focus back on Generate after sampling")
    assert visit.problems() == []


def test_an_explainer_closes_with_its_visible_button_and_focus_returns(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    pill = page.locator("#pills .pill-backend").first
    pill.focus()
    page.keyboard.press("Enter")
    explainer = page.locator(".explainer[data-pill=wasm]")
    expect(explainer).to_be_visible()
    close = explainer.get_by_role("button", name="Close")
    expect(close).to_be_visible()
    assert in_view(page, ".explainer[data-pill=wasm] .explainer-close")
    close.click()
    expect(explainer).to_be_hidden()
    assert page.evaluate("document.activeElement.classList.contains('pill-backend')")
    assert visit.problems() == []
