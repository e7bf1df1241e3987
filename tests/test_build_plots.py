"""Measured-results JSON -> inline SVG for the speedup page."""
import json
import re

import pytest

from tinygpt.build import plots
from tinygpt.build.context import BuildError


def write(tmp_path, name, data):
    folder = tmp_path / "content" / "data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(data if isinstance(data, str) else json.dumps(data))


RESULT = {"benchmark": "matmul", "hardware": "test box", "date": "2026-11-30", "command": "python bench/x.py",
          "x_label": "size", "series": [
              {"name": "tiled", "unit": "GFLOP/s", "points": [{"x": 1024, "y": 100}, {"x": 4096, "y": 400}]},
              {"name": "naive", "unit": "GFLOP/s", "points": [{"x": 1024, "y": 50}, {"x": 4096, "y": 60}]},
              {"name": "ratio", "unit": "x", "points": [{"x": "tiny", "y": 1.5}, {"x": "huge", "y": 2.0}]}]}


def test_no_data_means_no_plots(tmp_path):
    assert plots.load(tmp_path) == ([], [])


def test_series_become_one_svg_per_unit_without_inline_style(tmp_path):
    write(tmp_path, "matmul.json", RESULT)
    (result,), unplotted = plots.load(tmp_path)
    assert unplotted == []
    line, bars = result["plots"]
    assert line.count("<polyline") == 2 and "<rect" not in line
    assert bars.count("<rect") == 2 and ">tiny<" in bars
    assert "style=" not in line + bars
    # the higher value sits higher on the plot (smaller y)
    ys = [float(y) for y in re.findall(r'<circle class="series-0" cx="[\d.]+" cy="([\d.]+)"', line)]
    assert ys[0] > ys[1]
    assert [s["cls"] for s in result["legend"]] == ["series-0", "series-1", "series-2"]


def test_files_without_series_are_listed_not_plotted(tmp_path):
    write(tmp_path, "other.json", {"runs": [], "date": "2026-11-30", "command": "python bench/other.py"})
    assert plots.load(tmp_path) == ([], [{"source": "content/data/other.json", "date": "2026-11-30",
                                          "command": "python bench/other.py"}])


HEAD = '{"benchmark": "x", "hardware": "h", "date": "2026-11-30", "command": "c",\n'


@pytest.mark.parametrize("bad, message, needle", [
    ('\n{"benchmark": "x",\n "series": []}', "missing key 'hardware'", "{"),
    ("[\n]", "must be a JSON object", "["),
    (HEAD + ' "series":\n []}', "'series' must be a non-empty list", '"series"'),
    (HEAD + ' "series": [\n  {"name": "a", "unit": "u", "points": [{"x": 1, "y": 2}]},\n  {"name": "b", "unit": "u",'
            ' "points": []}]}', r"series\[1\] needs name, unit", '"b"'),
    (HEAD + ' "series": [{"name": "a", "unit": "u", "points": [\n  {"x": 1, "y": 2},\n  {"x": 2}]}]}',
     r"points\[1\] needs x and a numeric y", '{"x": 2}'),
    (HEAD + ' "series": [{"name": "a", "unit": "u",\n  "points": [{"x": 1, "y": 2}, {"x": "b", "y": 2}]}]}',
     "mixes text and number", '"points"'),
])
def test_bad_results_name_the_file_and_line(tmp_path, bad, message, needle):
    write(tmp_path, "bad.json", bad)
    with pytest.raises(BuildError, match=message) as e:
        plots.load(tmp_path)
    line = next(n for n, text in enumerate(bad.split("\n"), 1) if needle in text)
    assert e.value.where == f"content/data/bad.json:{line}"


def test_invalid_json_has_line_and_column(tmp_path):
    write(tmp_path, "bad.json", '{\n  "benchmark": ,\n}')
    with pytest.raises(BuildError) as e:
        plots.load(tmp_path)
    assert e.value.where == "content/data/bad.json:2:16"
