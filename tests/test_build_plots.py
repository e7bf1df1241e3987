"""Measured-results JSON -> inline SVG for the speedup page."""
import json
import re

import pytest

from tinygpt.site_build import plots
from tinygpt.site_build.context import BuildError


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


def test_series_become_one_figure_per_unit_drawn_wide_and_narrow_without_inline_style(tmp_path):
    write(tmp_path, "matmul.json", RESULT)
    (result,), unplotted = plots.load(tmp_path)
    assert unplotted == [] and result["id"] == "matmul"
    line, bars = result["figures"]
    for figure in (line, bars):
        assert [re.search(r'class="plot plot-(\w+)"', d)[1] for d in figure["drawings"]] == ["wide", "narrow"]
        assert [re.search(r'font-size="([\d.]+)"', d)[1] for d in figure["drawings"]] == [
            f"{layout.font:g}" for layout in plots.LAYOUTS]
    wide = line["drawings"][0]
    assert wide.count("<polyline") == 2 and "<rect" not in wide
    assert bars["drawings"][0].count("<rect") == 2 and ">tiny<" in bars["drawings"][0]
    assert "style=" not in "".join(line["drawings"] + bars["drawings"])
    # the higher value sits higher on the plot (smaller y)
    ys = [float(y) for y in re.findall(r'<circle class="series-0" r="3" cx="[\d.]+" cy="([\d.]+)"', wide)]
    assert ys[0] > ys[1]
    # Colours count from the first within each figure, which has its own legend.
    assert [s["cls"] for s in line["legend"]] == ["series-0", "series-1"]
    assert [(s["name"], s["cls"]) for s in bars["legend"]] == [("ratio", "series-0")]


def series(name, points, unit="u"):
    return {"name": name, "unit": unit, "points": [{"x": x, "y": y} for x, y in points]}


def drawings(tmp_path, *many, x_label="x"):
    write(tmp_path, "r.json", {**RESULT, "x_label": x_label, "series": list(many)})
    (result,), _ = plots.load(tmp_path)
    (figure,) = result["figures"]
    return figure


def x_labels(svg: str) -> list[tuple[float, str]]:
    return [(float(x), text) for x, text in re.findall(r'<text class="tick tick-x" x="([\d.]+)"[^>]*>([^<]*)<', svg)]


def test_x_labels_are_thinned_to_fit_the_width_they_are_drawn_at(tmp_path):
    # 101 steps of a loss curve: round steps, spaced so that no two labels overlap.
    figure = drawings(tmp_path, series("loss", [(1 + 5 * i, 5 - i / 30) for i in range(101)]))
    for layout, svg in zip(plots.LAYOUTS, figure["drawings"]):
        labels = x_labels(svg)
        assert 3 <= len(labels) <= 10, labels
        assert all(float(text) % 50 == 0 for _, text in labels)
        for (xa, a), (xb, b) in zip(labels, labels[1:]):
            assert xb - xa >= (layout.text_width(a) + layout.text_width(b)) / 2 + plots.GAP
        assert "<circle" not in svg  # a dense curve is drawn as a line alone
    # Sizes that double sit evenly on a log axis, each labelled.
    figure = drawings(tmp_path, series("a", [(1024, 1), (2048, 2), (4096, 3)]))
    (x1, _), (x2, _), (x3, _) = x_labels(figure["drawings"][0])
    assert x2 - x1 == pytest.approx(x3 - x2, abs=0.2)


def test_names_too_long_to_stand_side_by_side_are_slanted_inside_the_figure(tmp_path):
    names = ["stubs", "v1-stubs", "340-layers", "340-layers-nan", "history", "objects", "overflows", "escapes",
             "nested-lists", "nested-objects"]
    figure = drawings(tmp_path, series("python", [(n, i + 1) for i, n in enumerate(names)]),
                      series("typescript", [(n, 2 * i + 1) for i, n in enumerate(names)]))
    for layout, svg in zip(plots.LAYOUTS, figure["drawings"]):
        assert [t for _, t in x_labels(svg)] == names
        assert svg.count("rotate(-45") == len(names)
        first_x = x_labels(svg)[0][0]
        assert first_x - layout.text_width(names[0]) * 0.7072 >= 0, "the first name reaches out of the figure"


def test_a_series_drawn_over_another_is_dashed_and_the_legend_says_so(tmp_path):
    curve = [(1 + 5 * i, 5 - i / 30) for i in range(30)]
    figure = drawings(tmp_path, series("plain", curve), series("relaxed", [(x, y + 0.01) for x, y in curve]),
                      series("other", [(x, y / 2) for x, y in curve]))
    assert [s["note"] for s in figure["legend"]] == ["", "the same as plain, drawn dashed over it", ""]
    for svg in figure["drawings"]:
        assert re.findall(r'<polyline class="([^"]+)"', svg) == ["line series-0", "line series-1 dashed", "line series-2"]


def test_a_plot_with_more_series_than_colours_names_the_first_one_too_many(tmp_path):
    many = [series(f"s{i}", [(1, i), (2, i)]) for i in range(plots.N_COLOURS + 1)]
    text = json.dumps({**RESULT, "series": many}, indent=1)
    write(tmp_path, "bad.json", text)
    with pytest.raises(BuildError, match=f"at most {plots.N_COLOURS} apart by colour") as e:
        plots.load(tmp_path)
    name_line = next(n for n, t in enumerate(text.split("\n"), 1) if f'"s{plots.N_COLOURS}"' in t)
    assert e.value.where == f"content/data/bad.json:{name_line - 1}"  # the line opening that series


def test_the_stylesheet_colours_every_series_class():
    css = (plots.Path(__file__).resolve().parents[1] / "site" / "site.css").read_text()
    for k in range(plots.N_COLOURS):
        assert f".series-{k} {{" in css and f".swatch.series-{k} {{" in css


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
