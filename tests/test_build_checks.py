"""The checks step: broken links and anchors, inline script/style, Pages limits."""
from pathlib import Path

import pytest

from tinygpt.site_build import checks, deploy
from tinygpt.site_build.context import BuildError


def site(tmp_path, pages: dict[str, str]):
    for rel, body in pages.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<!doctype html><html><head></head><body>{body}</body></html>")
    return tmp_path


def test_good_links_anchors_and_folder_urls_pass(tmp_path):
    out = site(tmp_path, {
        "index.html": '<a href="/docs/#intro">d</a> <a href="docs/a/">a</a> <a href="https://example.org/x">ext</a>'
                      '<a href="#top" id="top">t</a> <a href="/docs">no slash</a> <a href="/feed.xml">feed</a>',
        "docs/index.html": '<h2 id="intro">Intro</h2><a href="../">up</a><a href="a/#s">a</a>',
        "docs/a/index.html": '<p id="s">s</p><script type="module" src="/app.js"></script>',
        "app.js": "",
        "feed.xml": "",
    })
    (out / "app.js").write_text("x")
    assert checks.check(out) == 9  # 6 links on the home page, 2 on docs/, 1 script


def test_without_origins_a_broken_link_is_placed_in_the_html(tmp_path):
    out = site(tmp_path, {"index.html": "", "docs/a/index.html": '<p>\n\n<a href="/docs/b/">b</a>'})
    with pytest.raises(BuildError) as e:
        checks.check(out)
    assert e.value.where == "dist/docs/a/index.html:3"  # where Markdown and templates wrote it: test_build_pages
    assert "docs/a/index.html: broken link '/docs/b/'" in str(e.value)


def test_broken_anchor_is_caught(tmp_path):
    out = site(tmp_path, {"index.html": '<a href="/docs/#missing">x</a>', "docs/index.html": '<h2 id="there">t</h2>'})
    with pytest.raises(BuildError, match="broken anchor '/docs/#missing'"):
        checks.check(out)


def test_every_problem_is_listed_not_just_the_first(tmp_path):
    out = site(tmp_path, {"index.html": '<a href="/a/">a</a><img src="/b.png" alt="">'})
    with pytest.raises(BuildError) as e:
        checks.check(out)
    assert "'/a/'" in str(e.value) and "'/b.png'" in str(e.value)


@pytest.mark.parametrize("body", ['<script>alert(1)</script>', '<p style="color: red">x</p>',
                                  '<style>p{}</style>', '<button onclick="go()">x</button>'])
def test_inline_script_and_style_fail_the_build(tmp_path, body):
    with pytest.raises(BuildError, match="CSP"):
        checks.check(site(tmp_path, {"index.html": body}))


def test_an_id_used_twice_on_a_page_fails_the_build_at_its_second_use(tmp_path):
    out = site(tmp_path, {"index.html": '<input id="seed">\n<p>\n<input id="seed">'})
    with pytest.raises(BuildError, match="id 'seed' is used twice") as e:
        checks.check(out)
    assert e.value.where == "dist/index.html:3"
    checks.check(site(tmp_path, {"index.html": '<input id="seed"><input id="sample-seed">'}))


def test_json_data_scripts_are_allowed(tmp_path):
    checks.check(site(tmp_path, {"index.html": '<script type="application/json">{"a": 1}</script>'}))


def test_redirect_targets_must_exist(tmp_path):
    out = site(tmp_path, {"index.html": ""})
    with pytest.raises(BuildError, match="_redirects sends") as e:
        checks.check_redirects(out)
    source, target, _ = checks.REDIRECTS[0]
    code = Path(deploy.__file__).read_text().split("\n")
    assert e.value.where == "tinygpt/site_build/deploy.py:%d" % next(
        n for n, line in enumerate(code, 1) if f'"{source}", "{target}"' in line)
    for _, target, _ in checks.REDIRECTS:
        site(tmp_path, {target.strip("/") + "/index.html": ""})
    checks.check_redirects(out)


def test_pages_limits(tmp_path, monkeypatch):
    (tmp_path / "big.bin").write_bytes(b"x" * 2048)
    monkeypatch.setattr(checks, "MAX_FILE_BYTES", 1024)
    with pytest.raises(BuildError, match="big.bin .*25 MiB"):
        checks.check_limits(tmp_path)
    monkeypatch.setattr(checks, "MAX_FILE_BYTES", 4096)
    monkeypatch.setattr(checks, "MAX_FILES", 0)
    with pytest.raises(BuildError, match="1 files"):
        checks.check_limits(tmp_path)
