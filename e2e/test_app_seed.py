"""Reproducible runs: the Seed under Advanced, with the same settings and
backend, gives the same loss curve in another page load, and another seed
another curve; the seed and the Advanced settings of a preset (learning rate,
warm-up) are saved with the run and come back when it is loaded."""
from playwright.sync_api import expect

from appdriver import advanced, configure, loss_table, open_app, saved_checkpoint, wait_finished, wait_state

STEPS = 12


def train(page, seed: int) -> list:
    """A Tiny run of STEPS steps on the CPU with `seed`, a learning rate of 0.004 and 3 warm-up steps; its loss table."""
    configure(page, steps=STEPS, eval_every=STEPS, save_every=STEPS, backend="wasm")
    advanced(page, seed=seed, lr=0.004, warmup=3)
    runs = page.locator("#messages .message-info", has_text=f"Training finished at step {STEPS}.").count() + 1
    page.click("#btn-start")
    wait_finished(page, STEPS, runs=runs)
    return loss_table(page)


def test_the_same_seed_gives_the_same_curve_and_is_saved_with_the_run(open_page, browser_no_webgpu):
    first = open_app(open_page, browser_no_webgpu, seed=1)
    second = open_app(open_page, browser_no_webgpu, seed=2)
    # Each page load draws a seed of its own and shows it.
    assert first.page.input_value("#seed") != second.page.input_value("#seed")
    curve = train(first.page, 4242)
    assert train(second.page, 4242) == curve
    other = train(second.page, 4243)
    assert [t for _, t, _ in other] != [t for _, t, _ in curve]

    page = first.page
    config = saved_checkpoint(page).trainer["config"]
    assert (config["seed"], config["lr"], config["warmup_steps"], config["batch_size"]) == (4242, 0.004, 3, 16)
    # Loaded after a reload, the run shows its own seed and settings again.
    page.reload()
    entry = page.locator("#checkpoint-list li")
    expect(entry).to_have_count(1, timeout=30_000)
    expect(entry).not_to_contain_text("open in another tab", timeout=30_000)
    assert page.input_value("#seed") != "4242"
    entry.get_by_role("button", name="Load to sample").click()
    wait_state(page, "ready", 60)
    for field, value in (("#seed", "4242"), ("#lr", "0.004"), ("#warmup", "3"), ("#batch", "16")):
        expect(page.locator(field)).to_have_value(value)
    assert first.problems() == [] and second.problems() == []
