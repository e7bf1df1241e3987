"""Messages: one polite live region, newest first; information fades out by
itself, errors stay until dismissed, at most a few show at once, all can be
dismissed at once, and none ever covers the Start row or the stats."""
import pytest
from playwright.sync_api import expect

from appdriver import open_app, wait_for, wait_state
from tests.oracles import checkpoint_corpus as corpus
from tinygpt.facts import FACTS

SHOWN = FACTS["app"]["messages_shown"]
FADE_S = FACTS["app"]["message_fade_ms"] / 1000


def refuse_empty_paste(page, times: int):
    """Start with empty pasted text, `times` times: one error each."""
    page.check("input[name=corpus-source][value=paste]")
    page.fill("#corpus-text", "")
    errors = page.locator("#messages .message-error")
    for _ in range(times):
        before = errors.count()
        page.click("#btn-start")
        expect(errors).to_have_count(before + 1, timeout=10_000)


# Records the text of every message that appears, so a test knows one came even if it has gone.
RECORD_MESSAGES = """() => {
    window.seenMessages = [];
    new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(n => n.classList?.contains('message')
        && seenMessages.push(n.textContent)))).observe(document.querySelector('#messages'), {childList: true, subtree: true});
}"""


def test_information_fades_out_and_errors_stay(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    # One live region holds them all; no message is a live region of its own.
    assert page.locator("#messages [aria-live]").evaluate_all("ns => ns.map(n => n.getAttribute('aria-live'))") == ["polite"]
    refuse_empty_paste(page, 1)
    page.mouse.move(0, 0)  # the pointer on a message would hold it
    page.evaluate(RECORD_MESSAGES)
    good = corpus.DIR / "v2-f32.tinygpt"
    page.set_input_files("#import-file", str(good))
    wait_for(lambda: any(f"Loaded {good.name}" in t for t in page.evaluate("seenMessages")), 30,
             "the note that the file loaded", page)
    wait_state(page, "ready", 30)
    assert page.locator("#messages [role]").count() == 0
    loaded = page.locator("#messages .message-info", has_text=f"Loaded {good.name}")
    expect(loaded).to_have_count(0, timeout=(FADE_S + 30) * 1000)
    error = page.locator("#messages .message-error")
    expect(error).to_have_count(1)
    expect(error).to_be_visible()
    expect(error).to_contain_text("The pasted text is empty")
    assert visit.problems() == []


def test_a_few_show_the_rest_wait_and_all_are_dismissed_at_once(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    refuse_empty_paste(page, SHOWN + 2)
    errors = page.locator("#messages .message-error")
    expect(errors.filter(visible=True)).to_have_count(SHOWN)
    more = page.get_by_role("button", name="Show 2 older")
    more.click()
    expect(errors.filter(visible=True)).to_have_count(SHOWN + 2)
    expect(page.get_by_role("button", name="Hide 2 older")).to_be_visible()

    # Dismissing one hands focus to the message that takes its place.
    page.locator("#messages .message").first.get_by_role("button", name="Dismiss message").click()
    expect(errors).to_have_count(SHOWN + 1)
    assert page.evaluate("document.activeElement.closest('.message') === document.querySelector('#messages .message')")

    page.get_by_role("button", name=f"Dismiss all ({SHOWN + 1})").click()
    expect(page.locator("#messages .message")).to_have_count(0)
    expect(page.locator("#messages .messages-bar")).to_be_hidden()
    assert page.evaluate("document.activeElement.id") == "btn-start"
    assert visit.problems() == []


# The element drawn at the centre of each control is that control: nothing lies over it. Only
# controls whose centre is scrolled into view count (the run column scrolls on its own on a desk).
COVERED = """() => {
    const centre = e => { const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; };
    const shown = e => {
        const [x, y] = centre(e);
        if (y < 0 || y > innerHeight) return false;
        for (let a = e.parentElement; a; a = a.parentElement) {
            if (getComputedStyle(a).overflowY === 'visible') continue;
            const r = a.getBoundingClientRect();
            if (y < r.top || y > r.bottom) return false;
        }
        return true;
    };
    return ['#btn-start', '#btn-pause', '#btn-stop', '#stats > div'].flatMap(s => [...document.querySelectorAll(s)])
        .filter(shown)
        .filter(e => { const at = document.elementFromPoint(...centre(e)); return !(at && e.contains(at)); })
        .map(e => e.id || e.textContent.trim().slice(0, 20));
}"""

BOXES_MEET = """() => {
    const meet = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const controls = [...document.querySelectorAll('#train .buttons, #stats')].map(e => e.getBoundingClientRect());
    return [...document.querySelectorAll('#messages .message')].filter(m => !m.hidden)
        .filter(m => controls.some(c => meet(m.getBoundingClientRect(), c))).length;
}"""


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}], ids=["desk", "phone"])
def test_errors_never_cover_the_start_row_or_the_stats(open_page, browser_no_webgpu, viewport):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.set_viewport_size(viewport)
    refuse_empty_paste(page, SHOWN + 4)
    page.get_by_role("button", name="Show 4 older").click()
    assert page.evaluate(BOXES_MEET) == 0
    for target in ("#btn-start", "#stats"):
        for block in ("start", "center", "end"):
            page.locator(target).evaluate("(e, block) => e.scrollIntoView({block})", block)
            assert page.evaluate(COVERED) == [], f"{target} scrolled to the {block}"
    assert visit.problems() == []
