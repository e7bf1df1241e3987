"""Shader validation with real compilers: naga through wgpu-py, Tint through Dawn."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tinygpt.build import shaders
from tinygpt.build.context import BuildError, Context

REPO = Path(__file__).resolve().parents[1]
GOOD = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n" \
       "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3u) {\n  x[id.x] = 2.0 * x[id.x];\n}\n"
BROKEN = GOOD.replace("2.0 * x[id.x]", "2.0 * y[id.x]")


def location_of(source: str, word: str) -> str:
    """1-based line:col of the first whole-line occurrence of word, found independently of any compiler."""
    for number, line in enumerate(source.splitlines(), 1):
        if word in line:
            return f"{number}:{line.index(word) + 1}"
    raise ValueError(word)
SUBGROUPS = "enable subgroups;\n" + GOOD.replace("2.0 * x[id.x]", "subgroupAdd(x[id.x])")


def run(tmp_path: Path, files: dict[str, str]) -> str:
    (tmp_path / "shaders").mkdir()
    for name, source in files.items():
        (tmp_path / "shaders" / name).write_text(source)
    return shaders.run(Context(root=tmp_path, out=tmp_path / "out", cache=tmp_path / ".cache"))


def test_valid_shader_passes(tmp_path):
    summary = run(tmp_path, {"good.wgsl": GOOD})
    assert summary.startswith("1 shaders valid: ")
    assert "1 by naga (wgpu) and Tint (Dawn)" in summary or "1 by naga only" in summary


def test_tint_catches_what_naga_lets_through(tmp_path):
    """Chromium compiles with Tint, whose uniformity analysis is stricter than naga's."""
    root = needs_dawn(tmp_path)
    barrier = GOOD.replace("x[id.x] = 2.0 * x[id.x];", "if (x[id.x] > 0.0) {\n    workgroupBarrier();\n  }")
    assert shaders.check_naga({"b.wgsl": barrier}) == {"b.wgsl": None}
    with pytest.raises(BuildError) as e:
        run(root, {"b.wgsl": barrier})
    assert e.value.where == f"shaders/b.wgsl:{location_of(barrier, 'workgroupBarrier')}"
    assert "uniform control flow" in str(e.value)


def test_broken_shader_fails_with_file_line_col(tmp_path):
    with pytest.raises(BuildError) as e:
        run(tmp_path, {"good.wgsl": GOOD, "broken.wgsl": BROKEN})
    assert e.value.where == f"shaders/broken.wgsl:{location_of(BROKEN, 'y[')}"
    assert "y" in str(e.value)


def test_a_fixed_shader_is_checked_again_and_cached_once_valid(tmp_path):
    with pytest.raises(BuildError):
        run(tmp_path, {"s.wgsl": BROKEN})
    (tmp_path / "shaders" / "s.wgsl").write_text(GOOD)
    assert "unchanged" not in shaders.run(Context(root=tmp_path, out=tmp_path / "out", cache=tmp_path / ".cache"))
    assert "1 unchanged" in shaders.run(Context(root=tmp_path, out=tmp_path / "out", cache=tmp_path / ".cache"))


def test_chromium_only_syntax_goes_to_tint():
    assert shaders.compiler_for(SUBGROUPS) == "tint"
    assert shaders.compiler_for(GOOD) == "naga"


def needs_dawn(tmp_path: Path) -> Path:
    if shaders._swiftshader_icd() is None or not (REPO / "node_modules" / "webgpu").exists():
        pytest.skip("no SwiftShader Vulkan driver or npm webgpu here, so Dawn has no adapter")
    return tmp_path


def test_tint_accepts_subgroups_and_locates_errors(tmp_path):
    root = needs_dawn(tmp_path)
    assert "1 by Tint" in run(root, {"sg.wgsl": SUBGROUPS})
    shutil.rmtree(root / "shaders")
    broken = SUBGROUPS.replace("subgroupAdd(x[id.x])", "subgroupAdd(nope)")
    with pytest.raises(BuildError) as e:
        run(root, {"sg.wgsl": broken})
    assert e.value.where == f"shaders/sg.wgsl:{location_of(broken, 'nope')}"
    assert "nope" in str(e.value)


def test_chromium_only_shader_without_dawn_names_its_enable_line(tmp_path, monkeypatch):
    def no_adapter(root, files):
        raise shaders.NoDawnAdapter("no adapter here")

    monkeypatch.setattr(shaders, "check_tint", no_adapter)
    source = "// reduction\n\n" + SUBGROUPS
    with pytest.raises(BuildError, match="only Tint can check") as e:
        run(tmp_path, {"sg.wgsl": source})
    assert e.value.where == f"shaders/sg.wgsl:{location_of(source, 'enable').split(':')[0]}"


def test_vulkan_loader_noise_stays_out_of_the_output(tmp_path, capfd, monkeypatch):
    """libwayland prints 'error: XDG_RUNTIME_DIR is invalid or not set' per adapter where it is unset."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    children = []
    real_run = subprocess.run

    def run_and_keep_stderr(*args, **kwargs):
        result = real_run(*args, **kwargs)
        children.append(result.stderr)
        return result

    monkeypatch.setattr(subprocess, "run", run_and_keep_stderr)
    summary = run(tmp_path, {"good.wgsl": GOOD})  # naga in this process, Tint in node where Dawn is here
    assert "unchanged" not in summary
    assert "XDG_RUNTIME_DIR" not in capfd.readouterr().err + "".join(children)
    assert "XDG_RUNTIME_DIR" not in os.environ
