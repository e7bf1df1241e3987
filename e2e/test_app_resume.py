"""Checkpoints in OPFS: a reload mid-training offers the run, and resuming it
continues the same loss curve, losing at most the steps since the last save;
a second tab sees the run as busy and cannot take it over."""
from playwright.sync_api import expect

from appdriver import configure, loss_table, open_app, wait_for, wait_state, wait_step


def saved_step(page) -> int:
    return int(page.locator("#save-status").get_attribute("data-step") or -1)


def test_reload_mid_training_resumes_the_same_curve(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    configure(page, steps=400, eval_every=40, save_every=40)
    page.click("#btn-start")
    wait_for(lambda: saved_step(page) >= 80, 120, "the checkpoint of step 80", page)
    wait_step(page, 90, 60)

    # Another tab of the same site lists the run as busy and offers no way to open it.
    other = page.context.new_page()
    other.goto(page.url)
    entry = other.locator("#checkpoint-list li")
    expect(entry).to_have_count(1, timeout=30_000)
    expect(entry).to_contain_text("open in another tab")
    for button in entry.locator("button").all():
        expect(button).to_be_disabled()
    other.close()

    before = loss_table(page)
    page.reload()
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=30_000)
    entry = page.locator("#checkpoint-list li")
    expect(entry).to_have_count(1, timeout=30_000)
    expect(entry).not_to_contain_text("open in another tab")
    saved = int(entry.inner_text().split("step ")[1].split()[0])
    assert saved >= 80 and saved % 40 == 0
    entry.locator(".resume-run").click()
    wait_state(page, "training", 60)
    wait_step(page, before[-1][0] + 5, 120)
    page.click("#btn-pause")
    wait_state(page, "ready", 60)
    after = loss_table(page)

    # The saved history comes back exactly; the steps after it are trained again on the
    # same batches from the same weights and Adam state, so they repeat the curve.
    assert after[:saved] == before[:saved]
    redone = {s: t for s, t, _ in after if saved < s <= before[-1][0]}
    assert len(redone) == before[-1][0] - saved
    for s, t, _ in before[saved:]:
        assert abs(redone[s] - t) < 2e-3, f"step {s}: {redone[s]} after resuming, {t} before"
    assert [r[0] for r in after] == list(range(1, after[-1][0] + 1))
    assert visit.problems() == []
