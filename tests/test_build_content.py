"""Front matter parsing and content checks: every error names file:line."""
import datetime
from pathlib import Path

import pytest

from tinygpt.site_build import content
from tinygpt.site_build.context import BuildError
from tinygpt.facts import FACTS


def parse_error(text: str) -> BuildError:
    with pytest.raises(BuildError) as e:
        content.parse(text, "content/docs/x.md")
    return e.value


def test_parses_toml_front_matter_and_body_line():
    meta, body, line = content.parse('+++\ntitle = "Hi"\norder = 3\ndate = 2026-11-30\n+++\nBody\n', "c.md")
    assert meta == {"title": "Hi", "order": 3, "date": datetime.date(2026, 11, 30)}
    assert body == "Body\n"
    assert line == 6


def test_invalid_toml_points_at_its_line_in_the_file():
    e = parse_error('+++\ntitle = "ok"\ndescription = oops\n+++\n')
    assert e.where == "content/docs/x.md:3"
    assert "invalid TOML" in str(e)


def test_missing_title():
    e = parse_error('+++\ndescription = "no title"\n+++\ntext')
    assert e.where == "content/docs/x.md:1"
    assert "no title" in str(e)


def test_unknown_key_names_key_and_line():
    e = parse_error('+++\ntitle = "T"\n\ntitel = "typo"\n+++\n')
    assert e.where == "content/docs/x.md:4"
    assert "'titel'" in str(e)


def test_wrong_type_bad_date_and_bad_slug():
    assert parse_error('+++\ntitle = "T"\norder = "1"\n+++\n').where == "content/docs/x.md:3"
    e = parse_error('+++\ntitle = "T"\n\ndate = "30/11/2026"\n+++\n')
    assert "YYYY-MM-DD" in str(e) and e.where == "content/docs/x.md:4"
    e = parse_error('+++\ntitle = "T"\nslug = "Not A Slug"\n+++\n')
    assert "lowercase" in str(e) and e.where == "content/docs/x.md:3"


def test_front_matter_must_open_and_close():
    e = parse_error("# no front matter\n")
    assert "'+++'" in str(e) and e.where == "content/docs/x.md:1"
    e = parse_error('+++\ntitle = "T"\n')
    assert "not closed" in str(e) and e.where == "content/docs/x.md:1"


def write(root, rel, text):
    path = root / "content" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_urls_are_folder_style(tmp_path):
    write(tmp_path, "index.md", '+++\ntitle = "Home"\n+++\n')
    write(tmp_path, "roadmap.md", '+++\ntitle = "R"\n+++\n')
    write(tmp_path, "docs/getting-started.md", '+++\ntitle = "G"\n+++\n')
    write(tmp_path, "devlog/2026-11-30-a.md", '+++\ntitle = "A"\ndate = 2026-11-30\ntime = "12:00"\nslug = "a"\n+++\n')
    urls = {p.source: p.url for p in content.load(tmp_path)}
    assert urls == {"content/index.md": "/", "content/roadmap.md": "/roadmap/",
                    "content/docs/getting-started.md": "/docs/getting-started/", "content/devlog/2026-11-30-a.md": "/devlog/a/"}


def test_duplicate_slug_names_both_files_at_their_slug_lines(tmp_path):
    write(tmp_path, "docs/a.md", '+++\ntitle = "A"\n+++\n')
    write(tmp_path, "docs/b.md", '+++\ntitle = "B"\n\nslug = "a"\n+++\n')
    with pytest.raises(BuildError) as e:
        content.load(tmp_path)
    assert e.value.where == "content/docs/b.md:4"
    assert "also made by content/docs/a.md:1" in str(e.value)  # a.md's address comes from its file name
    write(tmp_path, "docs/a.md", '+++\ntitle = "A"\nslug = "c"\n+++\n')
    write(tmp_path, "docs/c.md", '+++\ntitle = "C"\n+++\n')
    with pytest.raises(BuildError) as e:
        content.load(tmp_path)
    assert e.value.where == "content/docs/c.md:1" and "also made by content/docs/a.md:3" in str(e.value)


def test_not_utf8_gives_line_and_column_in_characters(tmp_path):
    path = tmp_path / "content/docs/x.md"
    path.parent.mkdir(parents=True)
    path.write_bytes('+++\ntitle = "X"\n+++\nnaïve text, then a Latin-1 byte: '.encode() + b"\xe9 here\n")
    with pytest.raises(BuildError) as e:
        content.load(tmp_path)
    assert e.value.where == f"content/docs/x.md:4:{len('naïve text, then a Latin-1 byte: ') + 1}"
    assert "0xe9" in str(e.value)


def test_pages_deeper_than_one_folder_are_refused(tmp_path):
    write(tmp_path, "docs/more/x.md", '+++\ntitle = "X"\n+++\n')
    with pytest.raises(BuildError) as e:
        content.load(tmp_path)
    assert e.value.where == "content/docs/more/x.md:1"


def test_devlog_needs_a_date_and_a_time(tmp_path):
    write(tmp_path, "devlog/x.md", '+++\ntitle = "X"\n+++\n')
    with pytest.raises(BuildError, match="needs a date") as e:
        content.load(tmp_path)
    assert e.value.where == "content/devlog/x.md:1"
    write(tmp_path, "devlog/x.md", '+++\ntitle = "X"\ndate = 2026-11-30\n+++\n')
    with pytest.raises(BuildError, match=r"needs a time \(HH:MM, UTC\)") as e:
        content.load(tmp_path)
    assert e.value.where == "content/devlog/x.md:1"


@pytest.mark.parametrize("value", ['"9:05"', '"24:00"', '"12:60"', '"12:00:00"', '"noon"', '"12:00Z"'])
def test_a_bad_time_names_its_line(value):
    e = parse_error(f'+++\ntitle = "T"\ndate = 2026-11-30\n\ntime = {value}\n+++\n')
    assert "is not HH:MM (24-hour clock, UTC)" in str(e) and e.where == "content/docs/x.md:5"


def test_a_toml_time_is_the_wrong_type():
    e = parse_error('+++\ntitle = "T"\ntime = 12:00:00\n+++\n')
    assert "'time' has the wrong type" in str(e) and e.where == "content/docs/x.md:3"


def test_explainer_pill_must_be_a_known_lever(tmp_path):
    write(tmp_path, "explainers/x.md", '+++\ntitle = "X"\npill = "warp-drive"\n+++\n')
    with pytest.raises(BuildError) as e:
        content.load(tmp_path)
    assert e.value.where == "content/explainers/x.md:3"
    assert FACTS["levers"][0]["id"] in str(e.value)
    write(tmp_path, "explainers/x.md", '+++\ntitle = "X"\n\nmetric = "warp-factor"\n+++\n')
    with pytest.raises(BuildError, match="unknown metric") as e:
        content.load(tmp_path)
    assert e.value.where == "content/explainers/x.md:4"
    write(tmp_path, "explainers/x.md", '+++\ntitle = "X"\n+++\n')
    with pytest.raises(BuildError, match="exactly one of") as e:
        content.load(tmp_path)
    assert e.value.where == "content/explainers/x.md:1"


def test_real_content_has_an_explainer_for_every_pill_and_metric():
    pages = content.load(Path(__file__).resolve().parents[1])
    pills = {p.meta.get("pill") for p in pages if p.kind == "explainers"}
    metrics = {p.meta.get("metric") for p in pages if p.kind == "explainers"}
    assert {lever["id"] for lever in FACTS["levers"]} | {b["id"] for b in FACTS["backends"]} <= pills
    assert {m["id"] for m in FACTS["metrics"]} <= metrics
