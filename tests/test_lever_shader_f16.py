"""The shader-f16 lever's matmul (shaders/levers/shader-f16/matmul_vec4.wgsl) against numpy's float64
product through wgpu-py, judged by facts.json's gate, the check the lever passes on a user's GPU.

Data as training has it: activations ~N(0,1) (GELU outputs >= 0), weights ~N(0,0.02), gradients
~1e-5 (a mean loss over 16384 tokens). The lever replaces matmul_nn (the linear layers' forward)
only: these tests also show why not nt and tn, whose operands include gradients that f16 holds
as subnormals, and that the gate refuses the kernel with its f32 spill removed (all of K summed
in f16) or with a k-tile dropped."""
from pathlib import Path

import numpy as np
import pytest

from tinygpt.facts import FACTS
from tinygpt.site_build import wgsl

try:
    from tests.oracles import gpu
    gpu.device()
except Exception as e:  # no wgpu or no adapter: a visible skip, not a pass
    pytest.skip(f"no WebGPU adapter for wgpu-py: {e}", allow_module_level=True)
if "shader-f16" not in gpu.device().features:
    pytest.skip("the wgpu-py adapter has no shader-f16", allow_module_level=True)

F16 = "levers/shader-f16/matmul_vec4"
GATE = FACTS["gate"]


def gate_errors(out, ref) -> tuple[float, float]:
    """(max_abs / mean|ref|, mean relative error with its floor), as webapp/levers/gate.ts's withinGate."""
    out, ref = np.asarray(out, np.float64).reshape(ref.shape), np.asarray(ref, np.float64)
    mean = np.abs(ref).mean()
    diff = np.abs(out - ref)
    return diff.max() / mean, (diff / np.maximum(np.abs(ref), GATE["rel_floor_frac_of_mean_ref"] * mean)).mean()


def within_gate(out, ref) -> bool:
    max_abs, rel = gate_errors(out, ref)
    return bool(max_abs < GATE["max_abs_frac_of_mean_ref"] and rel < GATE["mean_rel"])


def product(shader, o, A, B, block, flags=0, bias=None, C0=None, splits=1):
    """op(A)·op(B) of entry matmul_<o>, A [M,K] and B [K,N] stored as the orientation wants; split
    partials summed in float64."""
    (M, K), N = A.shape, B.shape[1]
    a = np.ascontiguousarray(A.T) if o == "tn" else A
    b = np.ascontiguousarray(B.T) if o == "nt" else B
    c = np.full(splits * M * N, np.nan, np.float32) if C0 is None else C0.ravel().copy()
    bias = np.zeros(N, np.float32) if bias is None else bias
    out = gpu.run(shader, f"matmul_{o}", dict(M=M, N=N, K=K, flags=flags), {1: a, 2: b, 3: bias, 4: c},
                  (-(-N // block), -(-M // block), splits), out=[4], constants={"BLOCK": block})[4]
    assert np.isfinite(out).all(), "an unwritten element or an overflow"
    return out.reshape(splits, M, N).astype(np.float64).sum(0)


def operands(rng, M, N, K, a_scale=1.0, b_scale=0.02, nonneg=False):
    A = rng.standard_normal((M, K)) * a_scale
    return (np.abs(A) if nonneg else A).astype(np.float32), (rng.standard_normal((K, N)) * b_scale).astype(np.float32)


@pytest.fixture
def rng():
    return np.random.default_rng(20261202)


# (M, N, K, GELU input): Huge's forward layers with M trimmed from 16384 rows (qkv, fc_in, fc_out,
# the attention projection) and shapes off every tile edge (M, N not multiples of 64 or 128, K not of BK).
NN_SHAPES = [(1024, 1536, 384, False), (512, 384, 1536, True), (768, 1152, 384, False),
             (260, 132, 68, False), (36, 68, 100, True), (4, 8, 4, False)]


@pytest.mark.parametrize("block", [128, 64])
@pytest.mark.parametrize("M,N,K,gelu", NN_SHAPES)
def test_nn_passes_the_gate(rng, block, M, N, K, gelu):
    A, B = operands(rng, M, N, K, a_scale=0.5 if gelu else 1.0, nonneg=gelu)
    ref = A.astype(np.float64) @ B
    max_abs, rel = gate_errors(product(F16, "nn", A, B, block), ref)
    assert max_abs < GATE["max_abs_frac_of_mean_ref"] and rel < GATE["mean_rel"], (max_abs, rel)


def test_nn_bias_accumulate_and_split(rng):
    """The forward adds its bias (flags BIAS); ACCUMULATE and split K behave as the plain module's."""
    M, N, K = 260, 132, 1000
    A, B = operands(rng, M, N, K)
    bias, C0 = (rng.standard_normal(N) * 0.1).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    ref = A.astype(np.float64) @ B
    assert within_gate(product(F16, "nn", A, B, 128, flags=1, bias=bias), ref + bias)
    assert within_gate(product(F16, "nn", A, B, 64, flags=2, C0=C0), ref + C0)
    assert within_gate(product(F16, "nn", A, B, 128, splits=3), ref)


@pytest.mark.parametrize("o,a_scale,b_scale", [("nt", 1e-5, 0.02), ("tn", 1.0, 1e-5)])
def test_gradient_orientations_fail_in_f16_so_the_lever_keeps_them_f32(rng, o, a_scale, b_scale):
    """dx = dy·Wᵀ (nt) and dW = xᵀ·dy (tn) with gradients ~1e-5: f16 flushes or truncates them. The
    plain module passes the same data, so the failure is f16's, not the test's."""
    M, N, K = (512, 384, 1536) if o == "nt" else (384, 384, 4096)
    A, B = operands(rng, M, N, K, a_scale, b_scale)
    ref = A.astype(np.float64) @ B
    assert within_gate(product("matmul_vec4", o, A, B, 64), ref)
    assert not within_gate(product(F16, o, A, B, 64), ref)


@pytest.mark.parametrize("mutation", ["no spill", "a k-tile dropped"])
def test_the_gate_refuses_a_broken_variant(rng, tmp_path, mutation):
    """The same check on the variant broken on purpose: summing all of K in f16 (SPILL off), or
    dropping each workgroup's first buffer of k-steps."""
    text = wgsl.compose(gpu.ROOT, F16).text
    broken = {"no spill": ("const SPILL = true;", "const SPILL = false;"),
              "a k-tile dropped": ("c00 += vec4<elem>(s00);", "c00 += select(vec4<elem>(s00), vec4<elem>(0.0), k0 == ks.x);")}[mutation]
    assert broken[0] in text
    path = tmp_path / "broken.wgsl"
    path.write_text(text.replace(*broken))
    A, B = operands(rng, 512, 384, 1536, a_scale=0.5, nonneg=True)
    ref = A.astype(np.float64) @ B
    assert within_gate(product(F16, "nn", A, B, 128), ref)
    assert not within_gate(product(Path(path), "nn", A, B, 128), ref)


def test_the_levers_node_gate_runs_where_dawn_offers_shader_f16_and_says_why_not_elsewhere(tmp_path):
    """webapp/levers/shader-f16/lever.test.ts (kernelTableAgrees on the lever's table and its
    mutation) through Dawn: it passes on an adapter with shader-f16 (the H200 with
    TINYGPT_DAWN_F16_TOGGLE=1) and skips, naming the missing feature, on one without."""
    import subprocess

    from tinygpt.site_build import node

    env = node.dawn_env()
    if node.dawn_driver(env) is None or not (gpu.ROOT / "node_modules" / "webgpu").exists():
        pytest.skip("no Dawn here (SwiftShader's Vulkan driver and npm webgpu)")
    wgsl.write_modules(gpu.ROOT)
    [bundle] = node.node_bundle(gpu.ROOT, ["webapp/levers/shader-f16/lever.test.ts"], tmp_path, link_modules=True)
    run = subprocess.run(["node", "--test", str(bundle)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# pass 1" in run.stdout or "# SKIP the adapter lacks shader-f16" in run.stdout, run.stdout
