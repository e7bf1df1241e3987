"""Checkpoints in OPFS: a reload mid-training offers the run, and resuming it
continues the same loss curve, losing at most the steps since the last save,
with the run's own step target, intervals and training time; a second tab sees
the run as busy and cannot take it over."""
from playwright.sync_api import expect

from appdriver import (configure, loss_table, open_app, saved_checkpoint, saved_step, start_on_cpu, wait_finished, wait_for, wait_state,
                       wait_step)


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

    # Training goes on while the table is read, so only its rows up to the last checkpoint the
    # page has heard of are surely complete: the worker shows a step's validation loss before
    # it saves that step. Later rows may still lack a validation loss the next save will hold.
    complete = saved_step(page)
    before = loss_table(page)
    page.reload()
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=30_000)
    entry = page.locator("#checkpoint-list li")
    expect(entry).to_have_count(1, timeout=30_000)
    expect(entry).not_to_contain_text("open in another tab")
    saved = int(entry.inner_text().split("step ")[1].split()[0])
    assert saved >= complete >= 80 and saved % 40 == 0
    entry.locator(".resume-run").click()
    wait_state(page, "training", 60)
    wait_step(page, before[-1][0] + 5, 120)
    page.click("#btn-pause")
    wait_state(page, "paused", 60)
    after = loss_table(page)

    # The saved history comes back exactly; the steps after it are trained again on the same
    # batches from the same weights and Adam state, and validated on the same windows, so
    # they repeat the curve exactly.
    assert [r[0] for r in after] == list(range(1, after[-1][0] + 1))
    assert after[:complete] == before[:complete]
    for (s, t, v), (_, t_after, v_after) in zip(before[complete:], after[complete:]):
        assert t_after == t, f"step {s}: train loss {t_after} after resuming, {t} before"
        assert v is None or v_after == v, f"step {s}: validation loss {v_after} after resuming, {v} before"
    assert visit.problems() == []


def test_a_resumed_run_keeps_its_target_intervals_and_training_time(open_page, browser_no_webgpu):
    visit = start_on_cpu(open_page, browser_no_webgpu, 3, steps=60, eval_every=10, save_every=15)
    page = visit.page
    wait_for(lambda: saved_step(page) >= 30, 120, "the checkpoint of step 30", page)

    page.reload()
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=30_000)
    expect(page.locator("#steps")).to_have_value("2000")  # the form's defaults
    entry = page.locator("#checkpoint-list li")
    expect(entry).to_have_count(1, timeout=30_000)
    expect(entry).not_to_contain_text("open in another tab", timeout=30_000)
    resumed = saved_checkpoint(page)
    run = resumed.trainer["run"]
    assert (run["target_steps"], run["eval_every"], run["save_every"]) == (60, 10, 15)
    assert run["elapsed_ms"] > 0
    entry.locator(".resume-run").click()
    wait_state(page, "training", 60)
    # The form shows the run's own settings, and the run goes on towards its own target.
    for field, value in (("#steps", "60"), ("#eval-every", "10"), ("#save-every", "15")):
        expect(page.locator(field)).to_have_value(value)
    expect(page.locator("#stat-step")).to_contain_text("/ 60")
    wait_finished(page, 60)

    final = saved_checkpoint(page)
    assert final.trainer["step"] == 60
    assert {k: v for k, v in final.trainer["run"].items() if k != "elapsed_ms"} == {
        "target_steps": 60, "eval_every": 10, "save_every": 15}
    # The time before the reload counts: the clock went on from the saved figure.
    assert final.trainer["run"]["elapsed_ms"] > run["elapsed_ms"]
    assert [s for s, _, v in loss_table(page) if v is not None] == [10, 20, 30, 40, 50, 60]

    # Resumed again after another reload, the finished run stays at its target and says so.
    page.reload()
    entry = page.locator("#checkpoint-list li")
    expect(entry).not_to_contain_text("open in another tab", timeout=30_000)
    entry.locator(".resume-run").click()
    reached = page.locator("#messages .message-info", has_text="The run has reached its target of 60 steps")
    wait_for(lambda: reached.count() == 1, 60, "the run to load at its target", page)
    wait_state(page, "ready", 30)
    expect(page.locator("#stat-step")).to_have_text("60 / 60")
    assert visit.problems() == []
