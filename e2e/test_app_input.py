"""Bad input gets a clear message and starts nothing: empty, binary and
over-limit uploads, and empty pasted text."""
from playwright.sync_api import expect

from appdriver import open_app, state
from tinygpt.facts import FACTS


def refused(page, expected: str):
    before = page.locator("#messages .message-error").count()
    page.click("#btn-start")
    expect(page.locator("#messages .message-error")).to_have_count(before + 1, timeout=10_000)
    expect(page.locator("#messages .message-error").first).to_contain_text(expected)
    assert state(page) == "empty"
    expect(page.locator("#btn-start")).to_be_enabled()


def test_bad_uploads_and_empty_paste_are_refused(open_page, browser_no_webgpu, tmp_path):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.check("input[name=corpus-source][value=upload]")

    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    page.set_input_files("#corpus-file", str(empty))
    refused(page, "empty.txt is empty")

    binary = tmp_path / "photo.txt"
    binary.write_bytes(bytes(range(256)) * 64)
    page.set_input_files("#corpus-file", str(binary))
    refused(page, "photo.txt looks binary")

    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\u00e9 cr\u00e8me br\u00fbl\u00e9e\n".encode("latin-1") * 100)
    page.set_input_files("#corpus-file", str(latin1))
    refused(page, "latin1.txt is not UTF-8 text")

    # A sparse file one byte over the limit: refused by its size, before it is read.
    huge = tmp_path / "huge.txt"
    limit = FACTS["data"]["max_upload_bytes"]
    with open(huge, "wb") as f:
        f.truncate(limit + 1)
    page.set_input_files("#corpus-file", str(huge))
    expected = f"huge.txt is 64 MiB ({limit + 1:,} bytes); the limit is 64 MiB ({limit:,} bytes)"
    expect(page.locator("#corpus-status")).to_contain_text(expected)
    refused(page, expected)

    page.check("input[name=corpus-source][value=paste]")
    page.fill("#corpus-text", "")
    refused(page, "The pasted text is empty")
    assert visit.problems() == []


def test_a_file_gone_before_it_is_read_is_refused_in_plain_words(open_page, browser_no_webgpu, tmp_path):
    visit = open_app(open_page, browser_no_webgpu)
    page = visit.page
    page.check("input[name=corpus-source][value=upload]")
    notes = tmp_path / "notes.txt"
    notes.write_text("To be, or not to be, that is the question.\n" * 50)
    page.set_input_files("#corpus-file", str(notes))
    notes.unlink()  # the browser reads a chosen file only when it is used: Start finds it gone
    refused(page, "The text could not be read: the file is no longer where it was (moved or deleted).")
    assert "DOMException" not in page.locator("#messages").inner_text()
    assert visit.problems() == []
