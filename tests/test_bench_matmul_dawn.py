"""bench/matmul_dawn.ts, the engine's matmul kernels timed through Dawn in Node, on SwiftShader: every
kernel checked against a float64 product before anything is timed, and --lever gating a lever's table
and timing its kernels beside the plain ones. storage-f16 is the lever that runs here and replaces
matmuls; its kernels read B as packed halves, which the bench must bind as the engine does."""
import json
import subprocess
from pathlib import Path

import pytest

from tinygpt.site_build import node

ROOT = Path(__file__).resolve().parent.parent
ENV = node.dawn_env()
if not node.dawn_driver(ENV):
    pytest.skip("Dawn has no Vulkan driver here (SwiftShader's comes with the chromium package)", allow_module_level=True)


def test_a_lever_is_gated_checked_and_timed_beside_the_plain_kernels(tmp_path):
    bench = node.build_cli(ROOT, tmp_path / "dist-cli")["matmul_dawn"]
    # A vec4 shape off every tile edge: the table picks the 64 block for it.
    run = subprocess.run(["node", str(bench), json.dumps([["odd", 132, 260, 68]]), "--lever", "storage-f16"],
                         cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["lever"] == "storage-f16" and out["gate"] == "passed"
    assert "storage-f16 matmul_vec4_nn_64" in out["checked"] and "storage-f16 matmul_vec4_nt_64" in out["checked"]
    series = {r["series"] for r in out["results"]}
    assert {"storage-f16 nn", "storage-f16 nt", "kernel table nn", "matmul tn"} <= series, series
    assert all(r["seconds"] > 0 and r["gflops"] > 0 for r in out["results"])


def test_a_weight_gradient_runs_the_tables_kernel_cut_along_k_as_the_graph_cuts_it(tmp_path):
    bench = node.build_cli(ROOT, tmp_path / "dist-cli")["matmul_dawn"]
    # C[64,128] = Aᵀ·B over 4096 rows, tn alone: the 64 block's 2 x 1 grid is cut into 16 runs of 256 (graph.ts MIN_RUN).
    run = subprocess.run(["node", str(bench), json.dumps([["dW", 64, 128, 4096, ["tn"]]])], cwd=tmp_path, env=ENV,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout)["results"]
    assert {r["series"] for r in results} == {"matmul tn", "kernel table tn"}, results
    table = next(r for r in results if r["series"] == "kernel table tn")
    assert table["op"] == "matmul_vec4_tn_64" and table["splits"] == 16, table


def test_a_lever_that_is_not_built_is_named_with_those_that_are(tmp_path):
    bench = node.build_cli(ROOT, tmp_path / "dist-cli")["matmul_dawn"]
    run = subprocess.run(["node", str(bench), "[]", "--lever", "no-such-lever"], cwd=tmp_path, env=ENV,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "no GPU lever no-such-lever" in run.stderr and "storage-f16" in run.stderr, run.stderr
