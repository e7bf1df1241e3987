"""The WebAssembly CPU backend in Node: compile cpu.wasm with asc exactly as the
site build does, bundle webapp/cpu/test/*.test.ts with esbuild, run `node --test`.
The Node tests check golden parity with tests/fixtures/golden_tiny.json, the
getState round trip, micro-batching, two threads on shared memory and bad input."""
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "node_modules" / ".bin"


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True, timeout=300, **kw)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} exited {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def test_cpu_backend_in_node(tmp_path):
    wasm = tmp_path / "cpu.wasm"
    run([BIN / "asc", "--config", "webapp/cpu/asconfig.json", "--target", "release", "--outFile", wasm])
    tests = sorted((ROOT / "webapp" / "cpu" / "test").glob("*.test.ts"))
    assert tests, "no webapp/cpu/test/*.test.ts found"
    run([BIN / "esbuild", *tests, ROOT / "webapp/cpu/test/thread_worker.ts", "--bundle", "--platform=node", "--format=esm",
         f"--outdir={tmp_path}", "--out-extension:.js=.mjs", "--log-level=warning"])
    bundles = sorted(tmp_path.glob("*.test.mjs"))
    run(["node", "--test", *bundles], env={**os.environ, "TINYGPT_CPU_WASM": str(wasm)})
