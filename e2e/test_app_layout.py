"""The app page's layout and accessibility: its own styles win over the base
look of controls, every control is a big enough target, at desk and phone
widths."""
import pytest

from appdriver import open_app

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
