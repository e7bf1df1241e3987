"""Rendering Markdown and templates, errors located in the right file, and the
atomic build."""
import fcntl
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tinygpt.site_build import main, markdown, pages
from tinygpt.site_build.context import BuildError, Context
from tinygpt.facts import FACTS

REPO = Path(__file__).resolve().parents[1]


def make_site(root: Path, files: dict[str, str]) -> Path:
    """A site with the real templates and stylesheet and the given content files."""
    shutil.copytree(REPO / "site", root / "site", ignore=shutil.ignore_patterns("app.html"))
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


MINIMAL = {
    "content/index.md": '+++\ntitle = "Home"\n+++\nWelcome. See [the guide](/docs/guide/#install).\n',
    "content/docs/guide.md": '+++\ntitle = "Guide"\nsection = "Start"\n+++\n## Install\n\nRun it.\n\n## Use\n\n'
                             "```python\nprint('hi')\n```\n\nGate: {{ facts.gate.mean_rel | pct }}\n",
    "content/speedup.md": '+++\ntitle = "Speedup"\n+++\nNumbers.\n',
    "content/roadmap.md": '+++\ntitle = "Roadmap"\n+++\nLevers.\n',
    "content/app.md": '+++\ntitle = "App"\n+++\nThe app.\n',  # old addresses redirect to /app/ and /devlog/
    "content/privacy.md": '+++\ntitle = "Privacy"\n+++\nNothing leaves.\n',  # every page's footer links to it
    "content/devlog/first.md": '+++\ntitle = "First"\ndate = 2026-11-30\ntime = "09:00"\n+++\nHello.\n',
}


def render(root: Path) -> Path:
    from tinygpt.site_build import content, plots

    out = root / "out"
    plotted, unplotted = plots.load(root)
    pages.render_all(root, out, {"site_css": "/assets/site.css"}, content.load(root),
                     {"plots": plotted, "unplotted": unplotted})
    return out


def test_markdown_highlights_code_and_builds_toc_without_inline_style():
    html, toc, _ = markdown.render("## One\n\n| a | b |\n|--:|---|\n| 1 | 2 |\n\n### Two\n\n```python\nx = 1\n```\n")
    assert '<h2 id="one">' in html and '<span class="n">x</span>' in html
    assert 'class="align-right"' in html and "style=" not in html
    assert toc == '<ul><li class="toc-h2"><a href="#one">One</a></li><li class="toc-h3"><a href="#two">Two</a></li></ul>'


def test_raw_html_in_markdown_is_escaped():
    html, _, _ = markdown.render('<script>alert(1)</script> <b onclick="x">b</b>')
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_pages_render_with_facts_toc_and_highlighting(tmp_path):
    out = render(make_site(tmp_path, MINIMAL))
    guide = (out / "docs/guide/index.html").read_text()
    assert f"Gate: {FACTS['gate']['mean_rel'] * 100:g}%" in guide
    assert 'href="#install"' in guide and '<span class="nb">print</span>' in guide
    assert '<meta property="og:title" content="Guide">' in guide
    assert (out / "index.html").exists() and (out / "404.html").exists() and (out / "docs/index.html").exists()
    assert "No measurements yet" in (out / "speedup/index.html").read_text()


def test_unknown_template_variable_names_template_and_line(tmp_path):
    site = make_site(tmp_path, {**MINIMAL, "content/odd.md": '+++\ntitle = "Odd"\ntemplate = "odd.html"\n+++\n'})
    (site / "site/templates/odd.html").write_text('{% extends "base.html" %}\n{% block content %}\n{{ page.nope }}\n{% endblock %}\n')
    with pytest.raises(BuildError) as e:
        render(site)
    assert e.value.where == "site/templates/odd.html:3"
    assert "nope" in str(e.value) and "content/odd.md" in str(e.value)


def test_a_missing_template_names_the_line_that_asked_for_it(tmp_path):
    site = make_site(tmp_path / "page", {**MINIMAL, "content/odd.md": '+++\ntitle = "Odd"\n\ntemplate = "odd.html"\n+++\n'})
    with pytest.raises(BuildError, match="'odd.html' not found") as e:
        render(site)
    assert e.value.where == "content/odd.md:4"
    (site / "site/templates/odd.html").write_text('{% extends "base.html" %}\n{% block content %}\n'
                                                  '{% include "gone.html" %}\n{% endblock %}\n')
    with pytest.raises(BuildError, match="'gone.html' not found") as e:
        render(site)
    assert e.value.where == "site/templates/odd.html:3"


def test_a_template_that_is_not_utf8_gives_line_and_column(tmp_path):
    site = make_site(tmp_path, MINIMAL)
    (site / "site/templates/post.html").write_bytes(b'{% extends "base.html" %}\n<p>caf\xe9</p>\n')
    with pytest.raises(BuildError, match="not valid UTF-8") as e:
        render(site)
    assert e.value.where == "site/templates/post.html:2:7"


def test_unknown_variable_in_markdown_names_the_content_line(tmp_path):
    site = make_site(tmp_path, {**MINIMAL, "content/docs/bad.md": '+++\ntitle = "Bad"\n+++\nline one\n\n{{ facts.nope.deeper }}\n'})
    with pytest.raises(BuildError) as e:
        render(site)
    assert e.value.where == "content/docs/bad.md:6"


def check_links(root: Path, files: dict[str, str]) -> BuildError:
    """The link checker's error on MINIMAL plus files, after the steps a build runs before it."""
    from tinygpt.site_build import checks, deploy, static

    ctx = Context(root=make_site(root, {**MINIMAL, **files}), out=root / "out", cache=root / ".cache")
    for step in (static, pages, deploy):
        step.run(ctx)
    with pytest.raises(BuildError) as e:
        checks.run(ctx)
    return e.value


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.split("\n"), 1) if needle in line)


GUIDE = MINIMAL["content/docs/guide.md"]


@pytest.mark.parametrize("markdown, needle", [
    ("A paragraph\nwhose second line links [here](/docs/gone/).\n", "(/docs/gone/)"),
    ("A [reference][r] link.\n\n[r]: /docs/gone/\n", "[r]:"),
    ("- a list\n- with an [anchor](/docs/guide/#nowhere)\n", "#nowhere"),
    ("![an image](/missing.png)\n", "missing.png"),
])
def test_a_broken_link_names_the_markdown_line_that_wrote_it(tmp_path, markdown, needle):
    text = GUIDE + "\n" + markdown
    e = check_links(tmp_path, {"content/docs/guide.md": text})
    assert e.where == f"content/docs/guide.md:{line_of(text, needle)}"
    assert "docs/guide/index.html: broken" in str(e)


def test_a_link_shown_on_another_page_names_the_markdown_it_came_from(tmp_path):
    explainer = '+++\ntitle = "Gate"\nmetric = "%s"\n+++\nSee\n[the numbers](/docs/gone/).\n' % FACTS["metrics"][0]["id"]
    e = check_links(tmp_path, {"content/explainers/gate.md": explainer,
                               "content/all.md": '+++\ntitle = "All"\ntemplate = "all.html"\n+++\n',
                               "site/templates/all.html": "{% for e in explainers %}{{ e.html }}{% endfor %}\n"})
    assert str(e).startswith("content/explainers/gate.md:6: all/index.html: broken link")  # all/ is checked first


def test_a_broken_link_or_inline_style_in_a_template_names_the_template_line(tmp_path):
    post = (REPO / "site/templates/post.html").read_text()
    edited = post.replace("{{ page.html }}", '{{ page.html }}\n<a href="/devlog/{{ page.slug }}/#gone">x</a>')
    e = check_links(tmp_path / "link", {"site/templates/post.html": edited})
    assert e.where == f"site/templates/post.html:{line_of(edited, '#gone')}"  # not the {{ ... }}-only hrefs
    e = check_links(tmp_path / "style", {"site/templates/post.html": edited.replace("#gone", "")
                                                         .replace("{{ page.html }}", '<p style="x">{{ page.html }}</p>')})
    assert e.where == f"site/templates/post.html:{line_of(post, '{{ page.html }}')}" and "CSP" in str(e)
    base = (REPO / "site/templates/base.html").read_text()
    edited = base.replace('href="/favicon.svg"', 'href="/favicon.png"')
    e = check_links(tmp_path / "base", {"site/templates/base.html": edited})
    assert e.where == f"site/templates/base.html:{line_of(edited, 'favicon.png')}"


def test_failed_build_keeps_the_old_dist_and_prints_the_cause_first(tmp_path, capsys):
    site = make_site(tmp_path, MINIMAL)
    steps = ["static", "pages", "deploy", "checks"]
    assert main.build(site, steps=steps)
    dist = site / "dist"
    before = (dist / "docs/guide/index.html").read_text()
    (site / "content/docs/guide.md").write_text('+++\ntitle = "Guide"\n+++\n[broken](/docs/missing/)\n')
    capsys.readouterr()
    assert not main.build(site, steps=steps)
    err = capsys.readouterr().err
    assert err.startswith("error: content/docs/guide.md:4: docs/guide/index.html: broken link '/docs/missing/'")
    assert (dist / "docs/guide/index.html").read_text() == before
    assert not list(site.glob(".dist-*")), "the temporary folder is cleaned up"


def test_successful_build_swaps_in_the_new_dist(tmp_path):
    site = make_site(tmp_path, MINIMAL)
    assert main.build(site, steps=["static", "pages"])
    (site / "content/docs/guide.md").write_text('+++\ntitle = "Guide two"\n+++\nNew.\n')
    assert main.build(site, steps=["static", "pages"])
    assert "Guide two" in (site / "dist/docs/guide/index.html").read_text()
    assert sorted(p.name for p in site.iterdir() if p.name.startswith(".dist")) == []


def test_roadmap_statuses_come_from_facts(tmp_path):
    from tinygpt.site_build import content, plots

    plotted, unplotted = plots.load(REPO)
    pages.render_all(REPO, tmp_path, {"site_css": "/assets/site.css", "app": "/a.js", "app_css": "/a.css",
                                      "worker": "/w.js", "wasm": "/c.wasm"},
                     content.load(REPO), {"plots": plotted, "unplotted": unplotted})
    roadmap = (tmp_path / "roadmap/index.html").read_text()
    for lever in FACTS["levers"]:
        row = roadmap[roadmap.index(f'<tr id="{lever["id"]}">'):]
        row = row[:row.index("</tr>")]
        assert f'<span class="pill">{lever["pill"]}</span>' in row
        assert f'<span class="status status-{lever["status"]}">{lever["status"]}</span>' in row
        assert (f"needs <code>{lever['feature']}</code>" if lever["feature"] else "needs no optional feature") in row


def test_interrupted_build_leaves_no_temporary_folder_and_stale_ones_go(tmp_path, monkeypatch):
    site = make_site(tmp_path, MINIMAL)
    stale = site / ".dist-killed"  # however new: no build holds the lock, so its maker is gone
    stale.mkdir()

    def interrupted(ctx):
        raise KeyboardInterrupt

    monkeypatch.setattr(pages, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main.build(site, steps=["static", "pages"])
    assert not list(site.glob(".dist-*"))
    assert not (site / "dist").exists()


STEPS = ["static", "pages", "deploy", "checks"]


def child_build(site: Path, kill_at: str = "", exchange: bool = True, **popen) -> subprocess.Popen:
    """A build of site in another process, killing itself at kill_at, optionally without renameat2."""
    code = ("import sys; from pathlib import Path; from tinygpt.site_build import main\n"
            + ("" if exchange else "main.exchange = lambda a, b: False\n")
            + f"sys.exit(0 if main.build(Path({str(site)!r}), steps={STEPS!r}) else 1)")
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, text=True,
                            env={**os.environ, "TINYGPT_BUILD_KILL_AT": kill_at}, **popen)


def tree(dist: Path) -> dict[str, bytes] | None:
    return {str(p.relative_to(dist)): p.read_bytes() for p in sorted(dist.rglob("*")) if p.is_file()} \
        if dist.exists() else None


def test_renameat2_exchanges_two_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a/x").write_text("a")
    (tmp_path / "b").mkdir()
    assert main.exchange(tmp_path / "a", tmp_path / "b")  # this Linux and filesystem have it
    assert (tmp_path / "b/x").read_text() == "a" and not (tmp_path / "a/x").exists()


@pytest.mark.parametrize("point, exchange", [("step:pages", True), ("swap", True), ("swapped", True),
                                             ("renamed", False), ("swapped", False)])
def test_a_build_killed_anywhere_leaves_a_complete_dist_and_the_next_build_removes_its_folders(
        tmp_path, point, exchange):
    site = make_site(tmp_path, MINIMAL)
    assert main.build(site, steps=STEPS)
    old = tree(site / "dist")
    guide = site / "content/docs/guide.md"
    second = MINIMAL["content/docs/guide.md"].replace("Run it.", "Run it twice.")
    guide.write_text(second)
    killed = child_build(site, point, exchange)
    assert killed.wait() == -signal.SIGKILL
    left = list(site.glob(".dist-*"))
    at_kill = tree(site / "dist")

    guide.write_text(second + "[broken](/nowhere/)\n")
    assert not main.build(site, steps=STEPS)  # the next build: it cleans up, then fails, changing nothing
    after = tree(site / "dist")
    assert not list(site.glob(".dist-*"))
    guide.write_text(second)
    assert main.build(site, steps=STEPS)
    new = tree(site / "dist")

    assert old != new
    assert after == (new if point == "swapped" else old)
    names = [p.name for p in left]
    if point == "renamed":  # no renameat2: no dist/ until the next build puts the old one back
        assert at_kill is None and ".dist-old" in names and len(names) == 2
    else:
        assert at_kill == after
        assert len(names) == (1 if exchange else 0)  # the kill's leftover, which the next build removed


def test_a_build_waits_for_a_running_one_and_keeps_its_folder(tmp_path):
    site = make_site(tmp_path, MINIMAL)
    running = site / ".dist-running"
    running.mkdir()
    (site / ".cache").mkdir()
    with open(site / ".cache/build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a build in progress holds it
        second = child_build(site, stdout=subprocess.PIPE)
        assert second.stdout.readline() == "waiting for another build of this folder to finish\n"
        assert running.exists()
    second.stdout.read()
    assert second.wait() == 0
    assert not running.exists() and (site / "dist/index.html").exists()
