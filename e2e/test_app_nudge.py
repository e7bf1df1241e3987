"""The "Power user?" nudge (webapp/app/nudge.ts) in Chromium: without WebGPU (Chromium on Linux
without chrome://flags#enable-unsafe-webgpu) it says what the flag would unlock, its Dismiss hides
it, and it stays dismissed after a reload; with the flag on (SwiftShader, whose features include
Chromium's experimental ones) it has nothing to say."""
from playwright.sync_api import expect

from appdriver import open_app, wait_ready


def test_without_webgpu_the_nudge_names_the_flag_and_stays_dismissed(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    expect(page.locator("#caps")).to_have_attribute("data-webgpu", "no")
    nudge = page.locator("#nudge")
    expect(nudge).to_be_visible()
    expect(nudge).to_contain_text("Power user?")
    expect(nudge).to_contain_text("chrome://flags#enable-unsafe-webgpu")
    expect(nudge).to_contain_text("train on your GPU")
    page.click("#nudge-dismiss")
    expect(nudge).to_be_hidden()
    visit.goto("/app/")
    wait_ready(page)
    expect(page.locator("#caps")).to_have_attribute("data-webgpu", "no")
    expect(nudge).to_be_hidden()
    assert visit.problems() == []


def test_with_the_flag_on_there_is_nothing_to_unlock(open_page, browser):
    visit = open_app(open_page, browser)
    page = visit.page
    expect(page.locator("#caps")).to_have_attribute("data-webgpu", "yes")
    expect(page.locator("#caps-features")).to_contain_text("chromium-experimental-")
    expect(page.locator("#nudge")).to_be_hidden()
    assert visit.problems() == []
