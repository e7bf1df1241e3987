"""Saving when the browser's storage is full (the origin's quota lowered through
DevTools): the checkpoint saved before is kept whole and still opens at its
step, nothing partial is left in OPFS, the page says what happened, and
training goes on. Temporary files a crashed tab left are removed at the next
start, unless another tab holds their run."""
from playwright.sync_api import expect

from appdriver import configure, loss_table, open_app, set_quota, step, usage, wait_for, wait_state

from tinygpt.facts import FACTS

SEED = 1234

OPFS_FILES = """async () => {
    const out = {};
    async function walk(folder, prefix) {
        for await (const [name, handle] of folder) {
            if (handle.kind === 'file') out[prefix + name] = (await handle.getFile()).size;
            else await walk(handle, prefix + name + '/');
        }
    }
    await walk(await navigator.storage.getDirectory(), '');
    return out;
}"""


def opfs_files(page) -> dict[str, int]:
    """Every file in the origin's OPFS, with its size."""
    return page.evaluate(OPFS_FILES)


def checkpoint_file(files: dict[str, int]) -> str:
    [name] = [n for n in files if n.endswith(".tinygpt")]
    return name


def train(page, *, steps: int, save_every: int):
    configure(page, steps=steps, eval_every=save_every, save_every=save_every, backend="wasm")
    page.click("#btn-start")
    finished = page.locator("#messages .message-info", has_text=f"Training finished at step {steps}.")
    wait_for(lambda: finished.count() == 1, 120, f"training to finish at step {steps}", page)
    wait_state(page, "ready", 30)


def first_save(open_page, browser):
    """A seeded app whose run has trained 5 steps and saved them; its OPFS files."""
    visit = open_app(open_page, browser, seed=SEED)
    train(visit.page, steps=5, save_every=5)
    return visit, opfs_files(visit.page)


def full_warnings(page):
    return page.locator("#messages .message-warn", has_text="the browser's storage for this site is full")


def load_saved_run(page, at_step: int):
    """After a reload: the one saved run is listed at `at_step`; Load opens it there."""
    page.reload()
    entry = page.locator("#checkpoint-list li")
    expect(entry).to_have_count(1, timeout=30_000)
    expect(entry).not_to_contain_text("open in another tab", timeout=30_000)  # the old page's worker has gone
    expect(entry).to_contain_text(f"step {at_step} ")
    entry.get_by_role("button", name="Load to sample").click()
    loaded = page.locator("#messages .message-info", has_text=f"Loaded the run at step {at_step} ")
    wait_for(lambda: loaded.count() == 1, 60, f"the run to load at step {at_step}", page)
    wait_state(page, "ready", 30)
    assert step(page) == at_step
    # Its text was kept too, so it can train on.
    expect(page.locator("#btn-resume")).to_be_enabled()


def test_the_first_save_fits_the_second_does_not(open_page, browser_no_webgpu):
    # What the first save of this seeded run leaves in storage, measured without a quota.
    probe, probe_files = first_save(open_page, browser_no_webgpu)
    checkpoint_bytes = probe_files[checkpoint_file(probe_files)]
    # Room for all of that plus half a checkpoint: the second save's temporary copy
    # is cut off halfway, while the first checkpoint still sits beside it.
    quota = usage(probe.page) + checkpoint_bytes // 2

    visit = open_app(open_page, browser_no_webgpu, seed=SEED)
    page = visit.page
    set_quota(page, quota)
    train(page, steps=10, save_every=5)
    expect(page.locator("#save-status")).to_have_attribute("data-step", "5")
    expect(full_warnings(page)).to_have_count(1)
    expect(full_warnings(page)).to_contain_text(
        "Saving the checkpoint at step 10 failed: the browser's storage for this site is full; "
        "the last good checkpoint (step 5) is kept. Training goes on")
    # The same files as the probe's first save, at the same sizes: no temporary or partial file.
    files = opfs_files(page)
    assert sorted(files.values()) == sorted(probe_files.values())
    # Beside the runs and their texts, only the numerics gate's verdicts (webapp/worker/verdicts.ts).
    assert all(name == FACTS["gate"]["verdicts_file"] or name.split("/")[0] in ("runs", "corpora") and not name.endswith(".tmp")
               for name in files)
    before = loss_table(page)

    load_saved_run(page, 5)
    assert loss_table(page) == before[:5]
    assert opfs_files(page) == files
    assert visit.problems() == []


def test_when_nothing_fits_the_saved_run_is_kept(open_page, browser_no_webgpu):
    visit, saved = first_save(open_page, browser_no_webgpu)
    page = visit.page
    before = loss_table(page)

    # Not one more byte: a new run on the other bundled text can store neither its
    # copy of the text nor any checkpoint.
    set_quota(page, usage(page))
    page.select_option("#corpus-select", "python")
    train(page, steps=10, save_every=5)
    expect(page.locator("#messages .message-warn", has_text="Could not keep a copy of the text")).to_contain_text(
        "storage for this site is full")
    expect(full_warnings(page).filter(has_text="Saving the checkpoint")).to_contain_text(
        [f"Saving the checkpoint at step {s} failed: the browser's storage for this site is full; "
         "no checkpoint of this run is saved yet. Training goes on; export the model to keep it." for s in (10, 5)])
    assert step(page) == 10
    assert opfs_files(page) == saved

    load_saved_run(page, 5)
    assert loss_table(page) == before
    assert opfs_files(page) == saved
    assert visit.problems() == []


def test_a_crashed_tabs_temporary_files_are_dealt_with_unless_their_run_is_open(open_page, browser_no_webgpu):
    visit, saved = first_save(open_page, browser_no_webgpu)
    page = visit.page
    page.click("#btn-reset")  # lets go of the run, as a crashed tab's worker would
    wait_state(page, "empty", 30)
    run = checkpoint_file(saved).removeprefix("runs/").removesuffix(".tinygpt")
    sha = next(n for n in saved if n.startswith("corpora/")).removeprefix("corpora/")
    # What tabs that crashed mid-save leave: for a run nobody holds, temporary files
    # not yet moved; for another that another tab has open (it may be writing them
    # right now), the same; and for the saved run, a crash between its two moves:
    # the checkpoint in place, its record still the one before, the new record beside it.
    crashed, busy = "00000000-0000-4000-8000-00000000dead", "00000000-0000-4000-8000-00000000b05e"
    orphans = {f"runs/{crashed}.tinygpt.tmp", f"runs/{crashed}.json.tmp", f"corpora/{crashed}.{sha}.tmp"}
    kept = {f"runs/{busy}.tinygpt.tmp", f"corpora/{busy}.{sha}.tmp"}
    page.evaluate("""async ([paths, run]) => {
        const root = await navigator.storage.getDirectory();
        const runs = await root.getDirectoryHandle('runs');
        const write = async (folder, name, data) => {
            const w = await (await folder.getFileHandle(name, {create: true})).createWritable();
            await w.write(data);
            await w.close();
        };
        for (const path of paths) {
            const [folder, name] = path.split('/');
            await write(await root.getDirectoryHandle(folder), name, new Uint8Array(1000));
        }
        const record = await (await runs.getFileHandle(run + '.json')).getFile();
        await write(runs, run + '.json.tmp', await record.text());
        await write(runs, run + '.json', JSON.stringify({...JSON.parse(await record.text()), step: 0, bytes: 1}));
    }""", [sorted(orphans | kept), run])
    # Another tab of the site (not the app, which would recover on its own) holds the busy run.
    other = page.context.new_page()
    other.goto(visit.base + "/docs/")
    other.evaluate("name => { navigator.locks.request(name, () => new Promise(() => {})); }", f"tinygpt-run-{busy}")

    # The worker recovers before it lists runs: the saved run shows with its own record.
    load_saved_run(page, 5)
    files = opfs_files(page)
    assert not orphans & files.keys()
    assert kept <= files.keys()
    assert {n: s for n, s in files.items() if n not in kept} == saved
    other.close()
    assert visit.problems() == []
