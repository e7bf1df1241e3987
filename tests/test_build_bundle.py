"""Bundling with esbuild: hashed ESM entry points, WGSL as text (shader modules composed first),
JSON as data, CSS from the page script, errors located; `npm ci` when node_modules is stale."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tinygpt.site_build import bundle, static
from tinygpt.site_build.context import BuildError, Context
from tinygpt.facts import FACTS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def root(tmp_path, monkeypatch):
    if not (REPO / "node_modules" / ".bin" / "esbuild").exists():
        pytest.skip("node_modules is not installed (npm ci)")
    # cpu.wasm has tests of its own (below, and tests/test_cpu_node.py): here it is a stand-in.
    def stand_in(root, cache, assets_dir):
        (assets_dir / "cpu-0.wasm").write_bytes(b"\0asm")
        return "/assets/cpu-0.wasm", True
    monkeypatch.setattr(bundle, "_wasm", stand_in)
    (tmp_path / "node_modules").symlink_to(REPO / "node_modules")
    (tmp_path / "package-lock.json").write_text("{}")
    os.utime(tmp_path / "package-lock.json", (0, 0))  # older than node_modules: no npm ci
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "site.css").write_text("body { margin: 0 }\n")
    app = tmp_path / "webapp" / "app"
    app.mkdir(parents=True)
    (tmp_path / "webapp" / "worker").mkdir()
    (tmp_path / "shaders" / "lib").mkdir(parents=True)
    (tmp_path / "shaders" / "k.wgsl").write_text('// KERNEL SOURCE\n#include "lib/part.wgsl"\n')
    (tmp_path / "shaders" / "lib" / "part.wgsl").write_text("// PART SOURCE\n")
    (tmp_path / "facts.json").write_text(json.dumps({"answer": 42}))
    (app / "app.css").write_text(".x { color: red }\n")
    (app / "main.ts").write_text('import src from "../../.cache/wgsl/k.wgsl";\nimport facts from "../../facts.json";\n'
                                 'import "./app.css";\nconsole.log(src, facts.answer);\n')
    (tmp_path / "webapp" / "worker" / "worker.ts").write_text('self.onmessage = () => postMessage("pong");\n')
    return tmp_path


def test_entry_points_are_hashed_esm_with_composed_wgsl_and_json_data(root):
    ctx = Context(root=root, out=root / "out", cache=root / ".cache")
    summary = bundle.run(ctx)
    assert "app, worker, wasm" in summary
    assert set(ctx.assets) == {"app", "app_css", "worker", "wasm"}
    for name in ("app", "worker", "app_css"):
        path = ctx.out / ctx.assets[name].lstrip("/")
        assert path.exists(), name
        assert ctx.assets[name].startswith(f"/assets/{name.split('_')[0]}-")
    app = (ctx.out / ctx.assets["app"].lstrip("/")).read_text()
    assert "42" in app
    # The module as tinygpt/site_build/wgsl.py composes it: prelude, the file, what it includes.
    assert "alias elem = f32;" in app and "// KERNEL SOURCE" in app and "// PART SOURCE" in app
    assert (ctx.out / (ctx.assets["app"].lstrip("/") + ".map")).exists()


def test_site_css_carries_pygments_classes_and_static_files_go_to_the_top(root):
    (root / "site" / "static").mkdir()
    (root / "site" / "static" / "favicon.svg").write_text("<svg/>")
    ctx = Context(root=root, out=root / "out", cache=root / ".cache")
    assert "1 static file" in static.run(ctx)
    css = (ctx.out / ctx.assets["site_css"].lstrip("/")).read_text()
    assert css.startswith("body { margin: 0 }") and ".highlight" in css
    assert (ctx.out / "favicon.svg").read_text() == "<svg/>"


def test_esbuild_error_names_file_line_col(root):
    source = "const x = ;\n"
    (root / "webapp" / "app" / "main.ts").write_text(source)
    with pytest.raises(BuildError) as e:
        bundle.run(Context(root=root, out=root / "out", cache=root / ".cache"))
    assert e.value.where == f"webapp/app/main.ts:1:{source.index(';') + 1}"


def test_npm_ci_runs_when_node_modules_is_older_than_the_lock(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(bundle.subprocess, "run",
                        lambda cmd, **kw: calls.append(cmd) or bundle.subprocess.CompletedProcess(cmd, 0, "", ""))
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / ".package-lock.json").write_text("{}")
    (tmp_path / "package-lock.json").write_text("{}")
    os.utime(tmp_path / "node_modules" / ".package-lock.json", (0, 0))
    bundle.ensure_node_modules(tmp_path)
    assert calls and calls[0][:2] == ["npm", "ci"]
    calls.clear()
    os.utime(tmp_path / "package-lock.json", (0, 0))
    os.utime(tmp_path / "node_modules" / ".package-lock.json", None)
    bundle.ensure_node_modules(tmp_path)
    assert calls == []


def _sections(data: bytes):
    """(id, payload) of each section of a WebAssembly module."""
    def leb(pos):
        value = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, pos
    assert data[:4] == b"\0asm"
    pos = 8
    while pos < len(data):
        size, start = leb(pos + 1)
        yield data[pos], data[start:start + size]
        pos = start + size


def test_cpu_wasm_carries_the_relaxed_build_in_a_custom_section(tmp_path):
    if not (REPO / "node_modules" / ".bin" / "asc").exists():
        pytest.skip("node_modules is not installed (npm ci)")
    out = tmp_path / "cpu.wasm"
    bundle.compile_cpu_wasm(REPO, out)
    name = next(lv["wasm_section"] for lv in FACTS["levers"] if lv["id"] == "relaxed-simd").encode()
    custom = [payload for section, payload in _sections(out.read_bytes()) if section == 0]
    relaxed = [p[1 + len(name):] for p in custom if p[0] == len(name) and p[1:1 + len(name)] == name]
    assert len(relaxed) == 1 and relaxed[0][:4] == b"\0asm"
    (tmp_path / "relaxed.wasm").write_bytes(relaxed[0])
    # The plain module runs on engines without relaxed SIMD; the relaxed one needs it (Node 20: behind a flag).
    check = ("const fs = require('fs'); console.log(['cpu.wasm', 'relaxed.wasm']"
             ".map((f) => WebAssembly.validate(fs.readFileSync(f))).join(' '))")

    def valid(*flags):
        return subprocess.run(["node", *flags, "-e", check], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()

    flag = "--experimental-wasm-relaxed-simd"
    options = subprocess.run(["node", "--v8-options"], capture_output=True, text=True, check=True).stdout
    if flag in options:
        assert valid(flag) == ["true", "true"]
    if f"default: --no-{flag[2:]}" in options:
        assert valid() == ["true", "false"]


def test_npm_ci_failure_names_the_lock_file(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle.subprocess, "run",
                        lambda cmd, **kw: bundle.subprocess.CompletedProcess(cmd, 1, "", "npm ERR! network"))
    (tmp_path / "package-lock.json").write_text("{}")
    with pytest.raises(BuildError, match="npm ERR! network") as e:
        bundle.ensure_node_modules(tmp_path)
    assert e.value.where == "package-lock.json:1"


def test_assemblyscript_error_names_file_line_col(tmp_path):
    if not (REPO / "node_modules" / ".bin" / "asc").exists():
        pytest.skip("node_modules is not installed (npm ci)")
    shutil.copytree(REPO / "webapp" / "cpu", tmp_path / "webapp" / "cpu", ignore=shutil.ignore_patterns("test"))
    (tmp_path / "node_modules").symlink_to(REPO / "node_modules")  # read only: asc runs from it, npm never does
    index = tmp_path / "webapp/cpu/assembly/index.ts"
    source = index.read_text() + '\nlet broken: i32 = "text";\n'
    index.write_text(source)
    with pytest.raises(BuildError, match="AssemblyScript failed") as e:
        bundle.compile_cpu_wasm(tmp_path, tmp_path / "cpu.wasm")
    line = source.count("\n", 0, source.index('"text"')) + 1
    assert e.value.where == f"webapp/cpu/assembly/index.ts:{line}:{len('let broken: i32 = ') + 1}"
