"""No silent loss: Start new model and Continue training are two buttons;
replacing a model whose steps no checkpoint holds (here: the browser's storage
is full) asks first, in a dialog the user can answer either way; a paused run
must be continued or ended before a new model starts; Delete in Saved runs
can be undone until its grace period ends, and the text a run trained on goes
from the browser's storage with the last run that names it."""
from playwright.sync_api import expect

from appdriver import (configure, loss_table, open_app, set_quota, start_on_cpu, state, step, usage, wait_finished, wait_for, wait_state,
                       wait_step)
from tinygpt.facts import FACTS


def test_replacing_unsaved_steps_asks_first(open_page, browser_no_webgpu):
    visit = open_app(open_page, browser_no_webgpu, seed=11)
    page = visit.page
    set_quota(page, usage(page))  # not one more byte: no checkpoint of this run can be saved
    configure(page, steps=6, eval_every=3, save_every=3, backend="wasm")
    page.click("#btn-start")
    wait_finished(page, 6)
    before = loss_table(page)
    dialog = page.locator("#confirm")

    # Each way of replacing the model asks; Cancel (or Escape) leaves it as it was.
    for trigger, answer in (("#btn-start", "#confirm-cancel"), ("#btn-reset", "Escape")):
        page.click(trigger)
        expect(dialog).to_be_visible()
        expect(page.locator("#confirm-text")).to_contain_text("6 steps of training that no checkpoint holds")
        if answer.startswith("#"):
            page.click(answer)
        else:
            page.keyboard.press(answer)
        expect(dialog).to_be_hidden()
        assert state(page) == "ready" and step(page) == 6
    assert loss_table(page) == before

    # Agreed to, a new model starts from step 0.
    page.fill("#steps", "2")
    page.click("#btn-start")
    expect(page.locator("#confirm-ok")).to_have_text("Starting a new model anyway")
    page.click("#confirm-ok")
    wait_finished(page, 2)
    assert [r[0] for r in loss_table(page)] == [1, 2]
    assert visit.problems() == []


def test_a_paused_run_is_continued_or_ended_before_a_new_model(open_page, browser_no_webgpu):
    visit = start_on_cpu(open_page, browser_no_webgpu, 12, steps=1000, eval_every=1000, save_every=1000)
    page = visit.page
    wait_step(page, 2, 60)
    page.click("#btn-pause")
    wait_state(page, "paused", 60)
    expect(page.locator("#btn-start")).to_be_disabled()
    expect(page.locator("#btn-resume")).to_be_enabled()
    # The pause saved the run, so nothing is lost: Stop ends it and a new model may start, unasked.
    wait_for(lambda: page.locator("#save-status").get_attribute("data-step") == str(step(page)), 30, "the pause's save", page)
    page.click("#btn-stop")
    wait_state(page, "ready", 30)
    expect(page.locator("#btn-resume")).to_be_disabled()
    page.fill("#steps", "2")
    page.click("#btn-start")
    wait_finished(page, 2)
    expect(page.locator("#confirm")).to_be_hidden()
    assert visit.problems() == []


def finish_and_reset(page, runs: int):
    """Until the page's `runs`-th run of 2 steps has finished (and been saved), then Reset."""
    wait_finished(page, 2, runs=runs)
    page.click("#btn-reset")
    wait_state(page, "empty", 30)


def stored(page, folder: str) -> list[str]:
    """The names in an OPFS folder of the page's origin."""
    return page.evaluate("""async (folder) => {
        const handle = await (await navigator.storage.getDirectory()).getDirectoryHandle(folder, { create: true });
        const names = [];
        for await (const [name] of handle) names.push(name);
        return names;
    }""", folder)


def test_delete_can_be_undone_until_its_grace_period_ends(open_page, browser_no_webgpu):
    visit = start_on_cpu(open_page, browser_no_webgpu, 13, steps=2, eval_every=2, save_every=2)
    page = visit.page
    finish_and_reset(page, 1)
    entry = page.locator("#checkpoint-list li")
    expect(entry).to_have_count(1)
    entry.get_by_role("button", name="Delete").click()
    expect(entry).to_contain_text(f"Its files go in {FACTS['app']['delete_undo_s']} s unless you undo")
    expect(page.get_by_role("button", name="Undo")).to_be_focused()
    page.get_by_role("button", name="Undo").click()
    expect(entry.get_by_role("button", name="Resume training")).to_be_enabled()

    # Not undone, the run goes once the grace period is over, and stays gone after a reload.
    entry.get_by_role("button", name="Delete").click()
    expect(entry).to_have_count(0, timeout=(FACTS["app"]["delete_undo_s"] + 30) * 1000)
    page.reload()
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=30_000)
    expect(page.locator("#resume-offer")).to_be_hidden()
    assert stored(page, "runs") == []
    assert visit.problems() == []


def test_a_text_goes_from_storage_with_the_last_run_that_names_it(open_page, browser_no_webgpu):
    visit = start_on_cpu(open_page, browser_no_webgpu, 17, steps=2, eval_every=2, save_every=2)
    page = visit.page
    finish_and_reset(page, 1)
    page.click("#btn-start")  # a second run on the same text
    finish_and_reset(page, 2)
    entries = page.locator("#checkpoint-list li")
    expect(entries).to_have_count(2)
    assert len(stored(page, "corpora")) == 1
    for left in (1, 0):
        entries.first.get_by_role("button", name="Delete").click()
        # The list is sent after the delete's clean-up.
        expect(entries).to_have_count(left, timeout=(FACTS["app"]["delete_undo_s"] + 30) * 1000)
        assert len(stored(page, "corpora")) == left, stored(page, "corpora")
    assert visit.problems() == []
