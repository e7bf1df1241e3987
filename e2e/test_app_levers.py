"""Levers in the app: the worker's numerics gate decides each lever's pill, its
verdict is remembered across visits (per adapter, browser version and shader
hash), and ?gate-fail=<id> makes a chosen lever's gate fail, so the slower
plain path runs. The CPU's relaxed-SIMD lever is the one Chromium has here."""
from playwright.sync_api import expect

from appdriver import configure, open_app, wait_state, wait_step

LEVER = "#caps-gate li[data-lever=relaxed-simd]"


def test_the_verdict_is_remembered_on_the_next_visit(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    expect(page.locator(LEVER)).to_have_attribute("data-verdict", "pass")
    expect(page.locator(LEVER)).to_have_attribute("data-cached", "no")
    page.reload()
    expect(page.locator(LEVER)).to_have_attribute("data-cached", "yes", timeout=30_000)
    expect(page.locator(LEVER)).to_have_attribute("data-verdict", "pass")
    expect(page.locator(LEVER)).to_contain_text("remembered")
    expect(page.locator("#pills .pill-lever")).to_have_text(["+relaxed-simd"])
    assert visit.problems() == []


def test_gate_fail_turns_the_lever_off_and_is_not_remembered(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu, "/app/?gate-fail=relaxed-simd")
    page = visit.page
    expect(page.locator(LEVER)).to_have_attribute("data-verdict", "fail")
    expect(page.locator(LEVER)).to_contain_text("forced to fail")
    expect(page.locator("#pills .pill-lever")).to_have_count(0)
    # Training runs the plain build.
    configure(page, steps=2, eval_every=100, save_every=100)
    page.click("#btn-start")
    wait_step(page, 1, 60)
    expect(page.locator("#stat-backend")).to_contain_text("SIMD")
    expect(page.locator("#stat-backend")).not_to_contain_text("relaxed")
    wait_state(page, "ready", 60)
    # Without the switch, the gate runs afresh (the forced verdict was never stored) and passes.
    visit.goto("/app/")
    expect(page.locator(LEVER)).to_have_attribute("data-verdict", "pass", timeout=30_000)
    expect(page.locator(LEVER)).to_have_attribute("data-cached", "no")
    assert visit.problems() == []
