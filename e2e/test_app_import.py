"""Importing a model file: hostile and broken files are refused with the
reader's own message and leave the loaded model as it was; a file over the
size cap is refused before any of it is read."""
from playwright.sync_api import expect

from appdriver import open_app, wait_state
from tests.oracles import checkpoint_corpus as corpus
from tinygpt.facts import FACTS


def import_refused(page, path, expected: str):
    before = page.locator("#messages .message-error").count()
    page.set_input_files("#import-file", str(path))
    expect(page.locator("#messages .message-error")).to_have_count(before + 1, timeout=30_000)
    message = page.locator("#messages .message-error").first
    expect(message).to_contain_text(f"{path.name} was refused: {expected}")
    expect(message).to_contain_text("The current model is unchanged")


def test_hostile_and_broken_model_files_are_refused_and_change_nothing(open_page, browser_no_webgpu, tmp_path):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    good = corpus.DIR / "v2-f32.tinygpt"
    page.set_input_files("#import-file", str(good))
    expect(page.locator("#messages")).to_contain_text(f"Loaded {good.name}: step 3, 1 layers, 4 wide", timeout=30_000)
    wait_state(page, "ready", 30)

    errors = FACTS["format"]["errors"]
    import_refused(page, corpus.DIR / "weights-nan.tinygpt",
                   errors["non_finite"].format(name="blocks.0.ln1.bias"))
    import_refused(page, corpus.DIR / "huge-n_layer-192-bytes.tinygpt",
                   errors["tensor_count"].format(weights=4 + 16 * 2**20, all=3 * (4 + 16 * 2**20), count=0))
    import_refused(page, corpus.DIR / "v1-flag-string.tinygpt", errors["legacy_flag"])

    # Past the size cap the file is refused by its size alone: a sparse file, never read.
    cap = FACTS["format"]["max_file_bytes"]
    huge = tmp_path / "huge.tinygpt"
    with open(huge, "wb") as f:
        f.write(good.read_bytes())
        f.truncate(cap + 1)
    import_refused(page, huge, errors["file_too_large"].format(size=cap + 1, max=cap))

    expect(page.locator("#stat-step")).to_contain_text("3")
    assert page.locator("#app").get_attribute("data-state") == "ready"
    assert visit.problems() == []
