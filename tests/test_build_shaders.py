"""Shader validation with real compilers, naga through wgpu-py and Tint through Dawn, of the modules
tinygpt/site_build/wgsl.py composes; each module's struct Params against the engine's table."""
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tinygpt.site_build import node, shaders, wgsl
from tinygpt.site_build.context import BuildError, Context
from tinygpt.facts import FACTS

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
    for name, source in files.items():
        (tmp_path / "shaders" / name).parent.mkdir(parents=True, exist_ok=True)
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


def test_a_module_tint_only_warns_about_passes(tmp_path):
    """Dawn prints a module's compilation warnings on stdout: the Tint check's answer must not be read from there."""
    root = needs_dawn(tmp_path)
    warns = ("diagnostic(warning, derivative_uniformity);\n"
             "@group(0) @binding(0) var t: texture_2d<f32>;\n@group(0) @binding(1) var s: sampler;\n"
             "@fragment fn main(@location(0) uv: vec2f) -> @location(0) vec4f {\n"
             "  if (uv.x > 0.5) { return textureSample(t, s, uv); }\n  return vec4f(0.0);\n}\n")
    assert shaders.check_tint(root, {"w.wgsl": warns}) == {"w.wgsl": None}


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
    if node.dawn_driver(node.dawn_env()) is None or not (REPO / "node_modules" / "webgpu").exists():
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


def test_an_error_in_an_included_file_names_that_file_and_the_module(tmp_path):
    lib = "// helpers\nfn twice(v: f32) -> f32 {\n  return 2.0 * w;\n}\n"
    module = '#include "lib/twice.wgsl"\n' + GOOD.replace("2.0 * x[id.x]", "twice(x[id.x])")
    with pytest.raises(BuildError) as e:
        run(tmp_path, {"m.wgsl": module, "lib/twice.wgsl": lib})
    assert e.value.where == f"shaders/lib/twice.wgsl:{location_of(lib, 'w;')}"
    assert "(in shaders/m.wgsl)" in str(e.value)


def test_an_include_of_a_missing_file_names_the_include(tmp_path):
    module = '// kernel\n#include "lib/nope.wgsl"\n' + GOOD
    with pytest.raises(BuildError, match="does not exist: shaders/lib/nope.wgsl") as e:
        run(tmp_path, {"m.wgsl": module})
    assert e.value.where == "shaders/m.wgsl:2"


def test_composition_puts_directives_first_and_includes_each_file_once(tmp_path):
    """WGSL wants directives before any declaration: the prelude's alias must not come first."""
    (tmp_path / "shaders" / "lib").mkdir(parents=True)
    (tmp_path / "shaders" / "lib" / "a.wgsl").write_text('#include "lib/b.wgsl"\nconst A = B;\n')
    (tmp_path / "shaders" / "lib" / "b.wgsl").write_text("const B = 1u;\n")
    (tmp_path / "shaders" / "m.wgsl").write_text('#include "lib/a.wgsl"\n#include "lib/b.wgsl"\nenable f16;\n' + GOOD)
    module = wgsl.compose(tmp_path, "m")
    lines = module.text.split("\n")
    assert lines[0] == "enable f16;" and module.where(1) == "shaders/m.wgsl:3"
    assert module.text.count("const B = 1u;") == 1


def test_a_replaced_include_composes_the_replacement_everywhere_after_it(tmp_path):
    """A lever's variant swaps a helper under the plain module's entry points: the plain module's
    own include of the helper, and its includes' includes, get the lever's file, once."""
    (tmp_path / "shaders" / "lib").mkdir(parents=True)
    (tmp_path / "shaders" / "levers" / "demo" / "lib").mkdir(parents=True)
    (tmp_path / "shaders" / "lib" / "twice.wgsl").write_text("fn twice(v: f32) -> f32 { return 2.0 * v; }\n")
    (tmp_path / "shaders" / "lib" / "uses.wgsl").write_text('#include "lib/twice.wgsl"\n')
    (tmp_path / "shaders" / "levers" / "demo" / "lib" / "twice.wgsl").write_text("fn twice(v: f32) -> f32 { return v + v; }\n")
    (tmp_path / "shaders" / "m.wgsl").write_text('#include "lib/uses.wgsl"\n#include "lib/twice.wgsl"\n' + GOOD)
    (tmp_path / "shaders" / "levers" / "demo" / "m.wgsl").write_text(
        '#replace "lib/twice.wgsl" with "levers/demo/lib/twice.wgsl"\n#include "m.wgsl"\n')
    text = wgsl.compose(tmp_path, "levers/demo/m").text
    assert text.count("fn twice") == 1 and "return v + v;" in text
    assert "return 2.0 * v;" in wgsl.compose(tmp_path, "m").text
    (tmp_path / "shaders" / "levers" / "demo" / "m.wgsl").write_text(
        '#include "m.wgsl"\n#replace "lib/twice.wgsl" with "levers/demo/lib/twice.wgsl"\n')
    with pytest.raises(BuildError, match="already included") as e:
        wgsl.compose(tmp_path, "levers/demo/m")
    assert e.value.where == "shaders/levers/demo/m.wgsl:2"


PARAMS = "struct Params {\n  n: u32,\n  scale: f32,\n}\n\n"


@pytest.mark.parametrize("struct,field,expected", [
    ("n: u32,\n  extra: u32,", "extra", "field 2 is extra, but tinygpt/facts.json:"),
    ("n: f32,", "n: f32", "field 1 is n:f32, but tinygpt/facts.json:"),
    ("count: u32,", "count", "field 1 is count, but tinygpt/facts.json:"),
])
def test_params_that_disagree_with_the_engines_table_fail_at_the_field(tmp_path, struct, field, expected):
    """gelu's row of facts.json wgsl.params says its Params is one u32, n."""
    assert FACTS["wgsl"]["params"]["gelu"] == ["n"]
    source = "// gelu\nstruct Params {\n  " + struct + "\n}\n" + GOOD
    with pytest.raises(BuildError, match=expected) as e:
        run(tmp_path, {"gelu.wgsl": source})
    assert e.value.where == "shaders/gelu.wgsl:" + location_of(source, field).split(":")[0]


def test_params_without_a_row_in_the_table_fail_at_the_struct(tmp_path):
    source = GOOD + PARAMS
    with pytest.raises(BuildError, match="no row in tinygpt/facts.json wgsl.params") as e:
        run(tmp_path, {"orphan.wgsl": source})
    assert e.value.where == "shaders/orphan.wgsl:" + location_of(source, "struct Params").split(":")[0]


def test_the_repositorys_modules_agree_with_the_table_and_a_changed_field_is_caught(tmp_path):
    shutil.copytree(REPO / "shaders", tmp_path / "shaders")
    for name in wgsl.names(tmp_path):
        shaders.check_params(wgsl.compose(tmp_path, name))
    path = tmp_path / "shaders" / "layernorm.wgsl"
    path.write_text(path.read_text().replace("  eps: f32,", "  eps: u32,", 1))
    with pytest.raises(BuildError, match="field 3 is eps, but tinygpt/facts.json:") as e:
        shaders.check_params(wgsl.compose(tmp_path, "layernorm"))
    assert e.value.where == "shaders/layernorm.wgsl:" + location_of(path.read_text(), "eps: u32").split(":")[0]


def test_the_matmul_modules_compose_as_f16():
    """elem is the hook for f16 variants: the matmul family compiles with `alias elem = f16;`."""
    import wgpu

    adapter = wgpu.gpu.request_adapter_sync()
    if adapter is None or "shader-f16" not in adapter.features:
        pytest.skip("no wgpu adapter with shader-f16 here")
    modules = {n: wgsl.compose(REPO, n, elem="f16") for n in ("matmul", "matmul_vec4")}
    assert all(m.text.startswith("enable f16;\nalias elem = f16;") for m in modules.values())
    assert shaders.check_naga({n: m.text for n, m in modules.items()}) == {"matmul": None, "matmul_vec4": None}


def test_a_levers_variant_is_a_module_held_to_its_plain_modules_params(tmp_path):
    """shaders/levers/<id>/<module>.wgsl is composed and written like any module, and its Params
    must be the plain module's row: the engine packs a variant's params by that row."""
    shutil.copytree(REPO / "shaders", tmp_path / "shaders")
    variant = tmp_path / "shaders" / "levers" / "demo" / "gelu.wgsl"
    variant.parent.mkdir(parents=True)
    variant.write_text('#include "gelu.wgsl"\n')
    assert "levers/demo/gelu" in wgsl.names(tmp_path)
    shaders.check_params(wgsl.compose(tmp_path, "levers/demo/gelu"))
    wgsl.write_modules(tmp_path)
    written = tmp_path / ".cache" / "wgsl" / "levers" / "demo" / "gelu.wgsl"
    assert written.read_text() == wgsl.compose(tmp_path, "levers/demo/gelu").text
    variant.write_text((tmp_path / "shaders" / "gelu.wgsl").read_text().replace("  n: u32,", "  count: u32,", 1))
    with pytest.raises(BuildError, match="field 1 is count, but tinygpt/facts.json:"):
        shaders.check_params(wgsl.compose(tmp_path, "levers/demo/gelu"))
    variant.unlink()
    wgsl.write_modules(tmp_path)
    assert not written.exists(), "a variant that is gone must not stay importable"


F16 = "enable f16;\n" + GOOD.replace("2.0 * x[id.x]", "f32(f16(2.0) * f16(x[id.x]))")


def test_a_module_dawns_adapter_cannot_take_is_nagas_alone_and_said_so(tmp_path, monkeypatch):
    """SwiftShader has no shader-f16: Tint refuses an `enable f16;` module for the adapter, not the
    code. naga checks it, the summary and a note say Tint did not, and a warm build does not start
    Dawn to be told again."""
    root = needs_dawn(tmp_path)
    ctx = Context(root=root, out=root / "out", cache=root / ".cache")
    (root / "shaders").mkdir()
    (root / "shaders" / "h.wgsl").write_text(F16)
    (root / "shaders" / "good.wgsl").write_text(GOOD)
    summary = shaders.run(ctx)
    if "2 by naga (wgpu) and Tint" in summary:
        pytest.skip("Dawn's adapter here offers shader-f16")
    assert "1 by naga (wgpu) and Tint (Dawn), 1 by naga only" in summary
    assert any("lacks shader-f16, so only naga checked shaders/h.wgsl" in n for n in ctx.notes)

    def no_dawn(root, files):
        raise AssertionError(f"Tint started again for {sorted(files)}")

    monkeypatch.setattr(shaders, "check_tint", no_dawn)
    warm = Context(root=root, out=root / "out", cache=root / ".cache")
    assert "1 by naga only" in shaders.run(warm) and warm.notes
    monkeypatch.undo()
    (root / "shaders" / "h.wgsl").write_text(F16.replace("f16(x[id.x])", "f16(y[id.x])"))
    with pytest.raises(BuildError) as e:  # naga alone still fails a broken one
        shaders.run(warm)
    assert e.value.where.startswith("shaders/h.wgsl:4:")


def test_chromium_only_wgsl_the_adapter_lacks_the_feature_for_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(shaders, "check_tint", lambda root, files: {n: shaders.Lacks("subgroups") for n in files})
    source = "// reduction\n" + SUBGROUPS
    with pytest.raises(BuildError, match="only Tint can check shaders/sg.wgsl .*lacks subgroups") as e:
        run(tmp_path, {"sg.wgsl": source})
    assert e.value.where == "shaders/sg.wgsl:2"


def test_a_module_only_other_hardware_compiles_needs_a_record_of_its_very_text(tmp_path, monkeypatch):
    """Subgroup matrices compile nowhere here: the build takes shaders/validated.json's record of a
    Tint pass on an adapter that has them, for the composed text it was made from, and no other."""
    monkeypatch.setattr(shaders, "check_tint", lambda root, files: {n: shaders.Lacks("chromium-experimental-subgroup-matrix") for n in files})
    source = "enable chromium_experimental_subgroup_matrix;\n" + GOOD
    with pytest.raises(BuildError, match="no record of this version: run `python -m tinygpt.site_build.shaders --record") as e:
        run(tmp_path, {"mm.wgsl": source})
    assert e.value.where == "shaders/mm.wgsl:1"
    composed = wgsl.compose(tmp_path, "mm").text
    record = {"sha256": hashlib.sha256(composed.encode()).hexdigest(), "adapter": "nvidia · nvidia-h200", "date": "2026-12-01T19:00:00+00:00"}
    (tmp_path / shaders.RECORDS).write_text(json.dumps({"records": {"shaders/mm.wgsl": record}}))
    summary = run(tmp_path, {})
    assert "1 by Tint on other hardware (shaders/validated.json: shaders/mm.wgsl on nvidia · nvidia-h200, 2026-12-01)" in summary
    assert "0 by Tint only" in summary
    with pytest.raises(BuildError, match="its record there is of an earlier version"):
        run(tmp_path, {"mm.wgsl": source.replace("2.0 * x[id.x]", "3.0 * x[id.x]")})


def test_the_record_run_writes_what_tint_passed_and_stops_on_what_it_refused(tmp_path, monkeypatch):
    (tmp_path / "shaders").mkdir()
    (tmp_path / "shaders" / "mm.wgsl").write_text("enable chromium_experimental_subgroup_matrix;\n" + GOOD)
    (tmp_path / "shaders" / "plain.wgsl").write_text(GOOD)
    seen = {}

    def tint(root, files, f16_toggle=False):
        seen.update(files=sorted(files), toggle=f16_toggle)
        return "nvidia · nvidia-h200", {n: None for n in files}

    monkeypatch.setattr(shaders, "tint", tint)
    assert shaders.record(tmp_path, f16_toggle=True) == ["shaders/mm.wgsl"]
    assert seen == {"files": ["shaders/mm.wgsl"], "toggle": True}  # only what naga cannot read
    written = json.loads((tmp_path / shaders.RECORDS).read_text())["records"]["shaders/mm.wgsl"]
    assert written["sha256"] == hashlib.sha256(wgsl.compose(tmp_path, "mm").text.encode()).hexdigest()
    assert written["adapter"] == "nvidia · nvidia-h200" and "vulkan_enable_f16_on_nvidia" in written["dawn_toggles"]
    monkeypatch.setattr(shaders, "tint", lambda root, files, f16_toggle=False: ("x", {n: ("bad thing", "2:3") for n in files}))
    with pytest.raises(BuildError, match=r"bad thing \(tint\)") as e:
        shaders.record(tmp_path, f16_toggle=False)
    assert e.value.where == "shaders/mm.wgsl:1:3"
