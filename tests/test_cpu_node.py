"""The WebAssembly CPU backend in Node: compile cpu.wasm exactly as the site
build does, bundle webapp/cpu/test/*.test.ts, the relaxed-SIMD lever's
tests (webapp/levers/relaxed-simd/*.test.ts) and the WebNN lever's (webapp/levers/webnn/*.test.ts,
whose graph and gate are checked against this backend) with esbuild, run `node --test`
with relaxed SIMD on (Node 20 needs the flag). The Node tests run the backend
conformance suite (webapp/engine/test/conformance.ts: the golden fixture, a
resumed run, the shapes tests/oracles/conformance.py writes here) on the plain and
the relaxed-SIMD build and on two threads sharing memory; the gate refusing a
relaxed build made wrong on purpose here; micro-batching, the fallback to one
thread, and bad input; the int8 decoding path's kernels, bit for bit, its held-out check, and that
check refusing an int8 kernel made wrong on purpose here. This file also runs the gate's training check on the
two builds (webapp/levers/relaxed-simd/curve.py)."""
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.oracles import conformance
from tinygpt.site_build.bundle import compile_cpu_wasm
from tinygpt.site_build.node import node_bundle, relaxed_simd_flags
from tinygpt.facts import FACTS

ROOT = Path(__file__).resolve().parent.parent


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    # A guard against a hang, not a measure of speed: the suite took more than 300 s in a CI run on a busy 2-core machine.
    out = subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True, timeout=1200, **kw)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} exited {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def broken_build(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    """A cpu.wasm from assembly/index.ts with each (from, to) edit made, all of whose targets must still be there."""
    root = tmp_path / name
    (root / "webapp" / "cpu" / "assembly").mkdir(parents=True)
    (root / "node_modules").symlink_to(ROOT / "node_modules")
    (root / "package-lock.json").write_text("{}")
    source = (ROOT / "webapp" / "cpu" / "assembly" / "index.ts").read_text()
    for old, new in edits:
        assert old in source, f"assembly/index.ts no longer holds {old}"
        source = source.replace(old, new)
    (root / "webapp" / "cpu" / "assembly" / "index.ts").write_text(source)
    (root / "webapp" / "cpu" / "asconfig.json").write_text((ROOT / "webapp" / "cpu" / "asconfig.json").read_text())
    compile_cpu_wasm(root, tmp_path / f"{name}.wasm")
    return tmp_path / f"{name}.wasm"


def broken_relaxed(tmp_path: Path) -> Path:
    """A cpu.wasm whose relaxed build subtracts where it should multiply-add: the gate must refuse it."""
    return broken_build(tmp_path, "broken", ("f32x4.relaxed_madd(a, b, c)", "f32x4.relaxed_nmadd(a, b, c)"))


def broken_int8(tmp_path: Path) -> Path:
    """A cpu.wasm whose int8 products drop the row's scale: the held-out loss check must refuse it."""
    return broken_build(tmp_path, "broken-int8", ("f32x4.mul(f32x4.splat(sx), v128.load(at(w, n)))", "v128.load(at(w, n))"),
                        ("(sx * load<f32>(at(w, n)))", "load<f32>(at(w, n))"))


def test_cpu_backend_in_node(tmp_path):
    wasm = tmp_path / "cpu.wasm"
    compile_cpu_wasm(ROOT, wasm)
    flags = relaxed_simd_flags()
    relaxed = bool(flags)
    tests = sorted((ROOT / "webapp" / "cpu" / "test").glob("*.test.ts")) + sorted((ROOT / "webapp" / "levers" / "relaxed-simd").glob("*.test.ts")) \
        + sorted((ROOT / "webapp" / "levers" / "webnn").glob("*.test.ts"))
    assert tests, "no webapp/cpu/test/*.test.ts found"
    bundles = node_bundle(ROOT, [t.relative_to(ROOT) for t in tests] + ["webapp/cpu/test/thread_worker.ts"], tmp_path)[:-1]
    conformance.write(tmp_path / "conformance")
    out = run(["node", *flags, "--test", *bundles],
        env={**os.environ, "TINYGPT_CPU_WASM": str(wasm), "TINYGPT_CONFORMANCE": str(tmp_path / "conformance"),
             "TINYGPT_CPU_BROKEN": str(broken_relaxed(tmp_path)), "TINYGPT_CPU_BROKEN_INT8": str(broken_int8(tmp_path)),
             "TINYGPT_CPU_RELAXED": "1" if relaxed else "0"})
    if relaxed:  # only a Node without relaxed SIMD may skip (the relaxed build's conformance, the broken int8 build's check)
        assert "# skipped 0" in out.stdout, out.stdout


def test_relaxed_build_keeps_the_loss_curve(tmp_path):
    """The numerics gate's training check for the relaxed-SIMD build: facts.gate's curve_steps steps on
    Shakespeare beside the plain build, every step's loss within curve_rel_tolerance (the script exits 1 if not)."""
    out = tmp_path / "curve.json"
    run([sys.executable, ROOT / "webapp" / "levers" / "relaxed-simd" / "curve.py", "--out", out])
    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["verdict"] == "pass" and rows[0]["steps"] == FACTS["gate"]["curve_steps"], rows
