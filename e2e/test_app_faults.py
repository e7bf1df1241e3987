"""A diverging run stops with a message, keeps its last good checkpoint and
loads it back, so the model in the tab is still usable. The divergence is
forced, the same every time: a learning rate of 1 on a run fixed by its seed."""
import re

from playwright.sync_api import expect

from appdriver import advanced, configure, loss_table, open_app, sample, wait_for, wait_state


# The run the test forces to diverge: always the same weights and batches.
SEED = 1
SAVE_EVERY = 10


def test_diverging_loss_stops_and_keeps_last_good_checkpoint(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    # Tiny's shape at a learning rate of 1 (the form's maximum), a batch of 4 and a context of
    # 32: once warm-up has ramped the rate up, Adam's steps of about lr per weight throw the
    # model far past uniform guessing. The seed fixes the run, so it diverges at the same step
    # every time (step 110 on the development machine, just after the warm-up's 100 steps),
    # and the last checkpoint before it, saved every SAVE_EVERY steps, is the one that comes back.
    configure(page, steps=400, eval_every=1000, save_every=SAVE_EVERY, batch=4, block=32)
    advanced(page, seed=SEED, lr=1)
    page.click("#btn-start")
    error = page.locator("#messages .message-error")
    wait_for(lambda: error.count() > 0, 300, "training to stop on a diverging loss", page)
    text = error.first.inner_text()
    found = re.search(r"the loss became .* at step (\d+)\. The last good checkpoint \(step (\d+)\) is kept", text)
    assert found, text
    bad_step, kept = int(found[1]), int(found[2])
    assert kept == (bad_step - 1) // SAVE_EVERY * SAVE_EVERY > 0, (bad_step, kept)
    wait_state(page, "ready", 60)
    expect(page.locator("#stat-step")).to_have_text(re.compile(rf"^{kept}\b"))
    # The kept model is sound: its history ends at its step, and it still samples.
    rows = loss_table(page)
    assert [r[0] for r in rows] == list(range(1, kept + 1))
    sampled, _ = sample(page, "a", temperature=1.0, top_k=0, length=20, timeout=30)
    assert len(sampled) > 1
    assert visit.problems() == []
