"""A diverging run stops with a message, keeps its last good checkpoint and
loads it back, so the model in the tab is still usable."""
import re

from playwright.sync_api import expect

from appdriver import advanced, configure, loss_table, open_app, sample, wait_for, wait_state


def test_diverging_loss_stops_and_keeps_last_good_checkpoint(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    # Tiny's shape at a learning rate of 1 (the form's maximum): once warm-up has ramped it
    # up, Adam's steps of about lr per weight throw the model far past uniform guessing.
    # The seed is random, and some seeds diverge within five steps, so the run saves every
    # step: whenever the loss breaks (never at step 1, which is uniform guessing), a
    # checkpoint from before it exists.
    configure(page, steps=400, eval_every=1000, save_every=1, batch=16, block=64)
    advanced(page, lr=1)
    page.click("#btn-start")
    error = page.locator("#messages .message-error")
    wait_for(lambda: error.count() > 0, 150, "training to stop on a diverging loss", page)
    text = error.first.inner_text()
    found = re.search(r"the loss became .* at step (\d+)\. The last good checkpoint \(step (\d+)\) is kept", text)
    assert found, text
    bad_step, kept = int(found[1]), int(found[2])
    assert kept == bad_step - 1
    wait_state(page, "ready", 60)
    expect(page.locator("#stat-step")).to_have_text(re.compile(rf"^{kept}\b"))
    # The kept model is sound: its history ends at its step, and it still samples.
    rows = loss_table(page)
    assert [r[0] for r in rows] == list(range(1, kept + 1))
    sampled, _ = sample(page, "a", temperature=1.0, top_k=0, length=20, timeout=30)
    assert len(sampled) > 1
    assert visit.problems() == []
