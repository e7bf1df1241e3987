"""Each WGSL kernel (shaders/*.wgsl) against the numpy reference (tinygpt/model.py, train.py)
through wgpu-py, on random inputs: odd shapes that are no multiple of any tile, and the
presets' real layer shapes (batch trimmed so the suite stays fast on a CPU adapter).

Outputs start as NaN, so an element a kernel forgets to write fails the comparison."""
import math
import struct
import zlib

import numpy as np
import pytest

from tinygpt import model, train
from tinygpt.facts import FACTS

try:
    from tests.oracles import gpu
    gpu.device()
except Exception as e:  # no wgpu or no adapter: a visible skip, not a pass
    pytest.skip(f"no WebGPU adapter for wgpu-py: {e}", allow_module_level=True)

# Largest allowed max|out - ref| / max|ref| per kernel family (the reference run in float64),
# with the reason for each, in facts.json so content/docs/kernels.md shows the same numbers.
TOLERANCE = {kernel: entry["max"] for kernel, entry in FACTS["kernel_tolerance"].items() if kernel != "_doc"}

PRESETS = FACTS["presets"]


def check(kernel: str, out, ref, floor=1e-30):
    """Max error relative to max|ref|, or to `floor` where the exact result is zero from a
    cancellation of larger terms (rounding noise measured against zero is no error)."""
    out = np.asarray(out, np.float64).reshape(np.shape(ref))
    ref = np.asarray(ref, np.float64)
    assert np.isfinite(out).all(), f"{kernel}: non-finite output (unwritten element or overflow)"
    scale = max(np.abs(ref).max(initial=0.0), floor)
    err = np.abs(out - ref).max(initial=0.0) / scale
    assert err <= TOLERANCE[kernel], f"{kernel}: max error {err:.3g} of max|ref| exceeds {TOLERANCE[kernel]:.3g}"


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))  # str hash() changes per process


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def nans(*shape):
    return np.full(shape, np.nan, np.float32)


def f64(*arrays):
    return [a.astype(np.float64) for a in arrays]


def test_params_are_packed_by_name_in_the_engines_order():
    """facts.json's wgsl.params orders the words, as the engine packs them; a missing or unknown
    name is refused rather than packed as something else."""
    assert gpu.pack_params("layernorm", dict(flags=2, eps=0.5, C=3, rows=7)) == struct.pack("<IIfI", 7, 3, 0.5, 2)
    with pytest.raises(KeyError):
        gpu.pack_params("layernorm", dict(rows=7, C=3, eps=0.5))
    with pytest.raises(KeyError):
        gpu.pack_params("gelu", dict(n=1, m=2))


# ---------------------------------------------------------------------------- matmul

MATMUL_SHAPES = [(37, 65, 100), (1, 256, 64), (5, 1, 3), (130, 129, 7), (128, 128, 128), (200, 70, 300),
                 (36, 68, 100), (4, 8, 4), (132, 260, 68)]
# (M, N, K) of every linear layer of each preset, for one sequence (M = T): q/k/v/o, fc_in, fc_out, head.
for _p in PRESETS:
    _T, _C = _p["block_size"], _p["n_embd"]
    MATMUL_SHAPES += [(_T, _C, _C), (_T, 4 * _C, _C), (_T, _C, 4 * _C), (_T, 256, _C)]

# (module, entry point, BLOCK) of every matmul the engine's kernel table holds: both modules share
# lib/matmul_tile.wgsl, whose override BLOCK is the block edge.
MATMULS = [(s, f"matmul_{o}", block) for s, block in (("matmul", 128), ("matmul_vec4", 128), ("matmul_vec4", 64))
           for o in ("nn", "nt", "tn")]


def vec4_fits(entry, M, N, K):
    """matmul_vec4 needs the contiguous dimensions of A, B and C to be multiples of 4."""
    return N % 4 == 0 and (M if "_tn" in entry else K) % 4 == 0


def matmul_cases(M, N, K):
    return [(s, e, block) for s, e, block in MATMULS if s == "matmul" or vec4_fits(e, M, N, K)]


def mm_params(M, N, K, flags=0):
    return dict(M=M, N=N, K=K, flags=flags)


def operands(entry, A, B):
    if "_nt" in entry:
        return A, B.T.copy()
    if "_tn" in entry:
        return A.T.copy(), B
    return A, B


@pytest.mark.parametrize("M,N,K", MATMUL_SHAPES)
def test_matmul(rng, M, N, K):
    A, B, bias = randn(rng, M, K), randn(rng, K, N), randn(rng, N)
    ref = A.astype(np.float64) @ B
    for shader, entry, block in matmul_cases(M, N, K):
        a, b = operands(entry, A, B)
        groups = (-(-N // block), -(-M // block), 1)
        out = gpu.run(shader, entry, mm_params(M, N, K), {1: a, 2: b, 3: bias, 4: nans(M, N)}, groups, out=[4],
                      constants={"BLOCK": block})[4]
        check("matmul", out, ref)


def test_matmul_vec4_covers_the_presets():
    """Every linear layer of every preset, forward and backward, can take the fast path."""
    for p in PRESETS:
        BT, C, V = p["batch_size"] * p["block_size"], p["n_embd"], FACTS["vocab_size"]
        for n_in, n_out in ((C, C), (C, 4 * C), (4 * C, C), (C, V)):
            assert vec4_fits("matmul_vec4_nn", BT, n_out, n_in) and vec4_fits("matmul_vec4_nt", BT, n_in, n_out)
            assert vec4_fits("matmul_vec4_tn", n_in, n_out, BT)


@pytest.mark.parametrize("shader,entry,block", MATMULS)
def test_matmul_bias_and_accumulate(rng, shader, entry, block):
    M, N, K = 68, 44, 36
    A, B, bias, C0 = randn(rng, M, K), randn(rng, K, N), randn(rng, N), randn(rng, M, N)
    a, b = operands(entry, A, B)
    groups = (-(-N // block), -(-M // block), 1)
    for flags, ref in ((1, A.astype(np.float64) @ B + bias), (2, A.astype(np.float64) @ B + C0),
                       (3, A.astype(np.float64) @ B + bias + C0)):
        out = gpu.run(shader, entry, mm_params(M, N, K, flags), {1: a, 2: b, 3: bias, 4: C0}, groups, out=[4],
                      constants={"BLOCK": block})[4]
        check("matmul", out, ref)


@pytest.mark.parametrize("shader,entry,block", MATMULS)
@pytest.mark.parametrize("K,S", [(1000, 3), (64, 4), (40, 7)])
def test_matmul_split_k(rng, shader, entry, block, K, S):
    """Dispatched with z = S, each split stores its own partial product; together they sum to A·B,
    also when K is short enough that the last splits get no k steps at all (64/4, 40/7)."""
    M, N = 68, 44
    A, B = randn(rng, M, K), randn(rng, K, N)
    a, b = operands(entry, A, B)
    groups = (-(-N // block), -(-M // block), S)
    out = gpu.run(shader, entry, mm_params(M, N, K), {1: a, 2: b, 3: a, 4: nans(S, M, N)}, groups, out=[4],
                  constants={"BLOCK": block})[4]
    parts = out.reshape(S, M * N)
    assert np.isfinite(parts).all()
    check("matmul", parts.astype(np.float64).sum(0), A.astype(np.float64) @ B)
    # The engine adds the partials with colsum, as a [S, M·N] matrix.
    summed = gpu.run("matmul", "colsum", mm_params(S, M * N, 0), {1: parts, 4: nans(M * N)},
                     (-(-M * N // 64), 1, 1), out=[4])[4]
    check("matmul", summed, A.astype(np.float64) @ B)


@pytest.mark.parametrize("shader,entry,block", MATMULS)
@pytest.mark.parametrize("S", [1, 3])
def test_matmul_stacked_products(rng, shader, entry, block, S):
    """P products along grid y (lib/matmul_block.wgsl): one A, each its own B, bias and C one after
    another, as the graph's q, k and v; with S splits, split z's P partials at z·P·M·N."""
    P, M, N, K = 3, 68, 44, 36
    A, Bs, biases = randn(rng, M, K), randn(rng, P, K, N), randn(rng, P, N)
    a = operands(entry, A, Bs[0])[0]
    b = np.stack([operands(entry, A, B)[1] for B in Bs])
    flags = 1 if S == 1 else 0
    groups = (-(-N // block), P * -(-M // block), S)
    out = gpu.run(shader, entry, mm_params(M, N, K, flags), {1: a, 2: b, 3: biases, 4: nans(S, P, M, N)}, groups,
                  out=[4], constants={"BLOCK": block})[4]
    got = out.reshape(S, P, M, N).astype(np.float64).sum(0)
    for j in range(P):
        check("matmul", got[j], A.astype(np.float64) @ Bs[j] + (biases[j] if flags else 0))


# (N, K): one vec4 (4, 4); under one workgroup's OUTS (32) outputs and under one round of K slices (8, 20);
# ragged past them (36, 100); then every preset's decoding products: C to C, C to 4C, 4C to C, the head.
MATVEC_SHAPES = [(4, 4), (8, 20), (36, 100)]
MATVEC_SHAPES += sorted({(n, k) for p in PRESETS for C in [p["n_embd"]]
                         for n, k in ((C, C), (4 * C, C), (C, 4 * C), (FACTS["vocab_size"], C))})


# matvec.wgsl's overrides, as kernels.ts sets them: the widest row its _ln entry points normalise,
# and the outputs a workgroup owns, by which the dispatch is sized (mv_groups).
MATVEC = {"MAX_K": 2048, "OUTS": 32}


def mv_params(N, K, flags=0, b_stride=0, bias_stride=0, c_stride=0):
    return dict(M=1, N=N, K=K, flags=flags, eps=FACTS["model"]["layernorm_eps"], b_stride=b_stride,
                bias_stride=bias_stride, c_stride=c_stride)


def mv_groups(N, products=1, constants=MATVEC):
    return (-(-N // constants["OUTS"]), products, 1)


@pytest.mark.parametrize("N,K", MATVEC_SHAPES)
@pytest.mark.parametrize("entry", ["matvec_nn", "matvec_nt"])
def test_matvec_is_matmul_for_one_row(rng, entry, N, K):
    A, B, bias, C0 = randn(rng, 1, K), randn(rng, K, N), randn(rng, N), randn(rng, N)
    a, b = operands(entry, A, B)
    product = (A.astype(np.float64) @ B)[0]
    for flags, ref in ((0, product), (1, product + bias), (3, product + bias + C0)):
        out = gpu.run("matvec", entry, mv_params(N, K, flags), {1: a, 2: b, 3: bias, 4: C0 if flags & 2 else nans(N)},
                      mv_groups(N), out=[4], constants=MATVEC)[4]
        check("matmul", out, ref)


@pytest.mark.parametrize("N,K", [(36, 100), (1040, 260)])
@pytest.mark.parametrize("outs", [4, 16, 64, 256])
@pytest.mark.parametrize("entry", ["matvec_nn", "matvec_nt"])
def test_matvec_takes_any_outputs_per_workgroup_its_table_sets(rng, entry, outs, N, K):
    """OUTS is the table's to choose (a power of 2 from 4 to 256): nn's columns and slices of K and
    nt's lanes per output follow from it, the dispatch is sized by it."""
    A, B, bias = randn(rng, 1, K), randn(rng, K, N), randn(rng, N)
    a, b = operands(entry, A, B)
    constants = {**MATVEC, "OUTS": outs}
    out = gpu.run("matvec", entry, mv_params(N, K, 1), {1: a, 2: b, 3: bias, 4: nans(N)},
                  mv_groups(N, constants=constants), out=[4], constants=constants)[4]
    check("matmul", out, (A.astype(np.float64) @ B)[0] + bias)


@pytest.mark.parametrize("N,K", MATVEC_SHAPES)
@pytest.mark.parametrize("entry", ["matvec_nn_ln", "matvec_nt_ln"])
def test_matvec_ln_is_layernorm_then_matmul(rng, entry, N, K):
    """The _ln entry points multiply LayerNorm(a) (model.layernorm_forward), the row normalised by
    each workgroup itself; a row offset from 0 and spread wide, as a residual stream is."""
    A, B, bias = randn(rng, 1, K) * 3 + 2, randn(rng, K, N), randn(rng, N)
    w, lb = randn(rng, K), randn(rng, K)
    a, b = operands(entry.removesuffix("_ln"), A, B)
    ref = model.layernorm_forward(*f64(A, w, lb))[0] @ B + bias
    out = gpu.run("matvec", entry, mv_params(N, K, 1), {1: a, 2: b, 3: bias, 4: nans(N), 6: w, 7: lb},
                  mv_groups(N), out=[4], constants=MATVEC)[4]
    check("layernorm", out, ref[0])


@pytest.mark.parametrize("N,K", MATVEC_SHAPES)
def test_matvec_nn_ln_gelu_is_gelu_of_the_product(rng, N, K):
    """A decoding step's fc_in: GELU (model.gelu_forward) of LayerNorm(a)·b + bias."""
    A, B, bias = randn(rng, 1, K) * 3 + 2, randn(rng, K, N), randn(rng, N)
    w, lb = randn(rng, K), randn(rng, K)
    ref, _ = model.gelu_forward(model.layernorm_forward(*f64(A, w, lb))[0] @ B + bias)
    out = gpu.run("matvec", "matvec_nn_ln_gelu", mv_params(N, K, 1), {1: A, 2: B, 3: bias, 4: nans(N), 6: w, 7: lb},
                  mv_groups(N), out=[4], constants=MATVEC)[4]
    check("layernorm", out, ref[0])


@pytest.mark.parametrize("entry", ["matvec_nn", "matvec_nn_ln"])
def test_matvec_nn_runs_several_products_of_one_row_at_strides(rng, entry):
    """Grid y picks product y: weights, biases and outputs b_stride, bias_stride and c_stride vec4s
    apart (a decoding step's q, k and v); what lies between them is left alone."""
    K, N, P = 36, 20, 3
    gap_w, gap_b, gap_c = 12, 8, 4  # padding, in floats, after each weight, bias and output
    A, W, bias = randn(rng, 1, K), randn(rng, P, K, N), randn(rng, P, N)
    w, lb = randn(rng, K), randn(rng, K)
    pad = lambda x, gap: np.concatenate([np.concatenate([t.ravel(), np.full(gap, 7.0, np.float32)]) for t in x])  # noqa: E731
    rows = model.layernorm_forward(*f64(A, w, lb))[0] if entry.endswith("_ln") else A.astype(np.float64)
    norm = {6: w, 7: lb} if entry.endswith("_ln") else {}
    out = gpu.run("matvec", entry, mv_params(N, K, 1, (K * N + gap_w) // 4, (N + gap_b) // 4, (N + gap_c) // 4),
                  {1: A, 2: pad(W, gap_w), 3: pad(bias, gap_b), 4: np.zeros(P * (N + gap_c), np.float32), **norm},
                  mv_groups(N, P), out=[4], constants=MATVEC)[4].reshape(P, N + gap_c)
    for y in range(P):
        check("layernorm", out[y, :N], (rows @ W[y] + bias[y])[0])
    assert (out[:, N:] == 0).all(), "an output's padding was written"


# colsum for any N, and colsum_vec4 (matmul_vec4.wgsl) where N is a multiple of 4: rows fewer than its
# 16 lanes, and runs long enough for its loop of four loads in flight, with a remainder.
COLSUMS = [("matmul", "colsum", M, N) for M, N in [(1, 1), (37, 65), (1000, 130)]]
COLSUMS += [("matmul_vec4", "colsum_vec4", M, N) for M, N in [(1, 4), (37, 68), (1000, 132), (333, 1536)]]


@pytest.mark.parametrize("shader,entry,M,N", COLSUMS)
def test_colsum(rng, shader, entry, M, N):
    A, C0 = randn(rng, M, N), randn(rng, N)
    groups = (-(-N // 64), 1, 1)
    out = gpu.run(shader, entry, mm_params(M, N, 0), {1: A, 4: nans(N)}, groups, out=[4])[4]
    check("matmul", out, A.astype(np.float64).sum(0))
    out = gpu.run(shader, entry, mm_params(M, N, 0, 2), {1: A, 4: C0}, groups, out=[4])[4]
    check("matmul", out, A.astype(np.float64).sum(0) + C0)
    # Split over S runs of rows (the engine does this for many rows): S partial sums per column,
    # each its own run's.
    S = min(M, 7)
    out = gpu.run(shader, entry, mm_params(M, N, 0), {1: A, 4: nans(S, N)}, (groups[0], S, 1), out=[4])[4]
    run = -(-M // S)
    for s, part in enumerate(out.reshape(S, N)):
        check("matmul", part, A[s * run:(s + 1) * run].astype(np.float64).sum(0))
    # P matrices stacked (grid z), split or not: matrix z's S runs of sums after those of the ones
    # before it.
    P = 3
    stack = randn(rng, P, M, N)
    for runs in (1, S):
        out = gpu.run(shader, entry, mm_params(M, N, 0), {1: stack, 4: nans(P, runs, N)}, (groups[0], runs, P), out=[4])[4]
        run = -(-M // runs)
        for z, sums in enumerate(out.reshape(P, runs, N)):
            for s, part in enumerate(sums):
                check("matmul", part, stack[z, s * run:(s + 1) * run].astype(np.float64).sum(0))


# ---------------------------------------------------------------------------- layernorm

LN_SHAPES = [(1, 1, 7), (3, 5, 100), (2, 9, 333)] + [(1, p["block_size"], p["n_embd"]) for p in PRESETS]


@pytest.mark.parametrize("B,T,C", LN_SHAPES)
def test_layernorm(rng, B, T, C):
    x = randn(rng, B, T, C) * 3 + 1
    w, b, dout, dx0 = randn(rng, C), randn(rng, C), randn(rng, B, T, C), randn(rng, B, T, C)
    rows, eps = B * T, FACTS["model"]["layernorm_eps"]
    ref, cache = model.layernorm_forward(*f64(x, w, b))
    params = dict(rows=rows, C=C, eps=eps, flags=0)
    r = gpu.run("layernorm", "layernorm_forward", params,
                {1: x, 2: w, 3: b, 4: nans(rows, C), 5: nans(rows), 6: nans(rows)}, (rows, 1, 1), out=[4, 5, 6])
    check("layernorm", r[4], ref)
    check("layernorm", r[6], cache[1].ravel())
    check("layernorm", r[5], x.astype(np.float64).mean(-1).ravel())

    # With the residual add: LayerNorm of x = a + b, the sum written to binding 12, all as above bit for bit.
    a = randn(rng, B, T, C)
    fused = gpu.run("layernorm", "layernorm_forward_residual", params,
                    {1: a, 11: x - a, 2: w, 3: b, 4: nans(rows, C), 5: nans(rows), 6: nans(rows), 12: nans(rows, C)},
                    (rows, 1, 1), out=[4, 5, 6, 12])
    total = (a + (x - a)).ravel()
    np.testing.assert_array_equal(fused[12], total)
    unfused = gpu.run("layernorm", "layernorm_forward", params,
                      {1: total, 2: w, 3: b, 4: nans(rows, C), 5: nans(rows), 6: nans(rows)}, (rows, 1, 1), out=[4, 5, 6])
    for i in (4, 5, 6):
        np.testing.assert_array_equal(fused[i], unfused[i])

    dx, dw, db = model.layernorm_backward(dout.astype(np.float64), cache, w.astype(np.float64))
    saved = {1: x, 2: w, 5: r[5], 6: r[6], 7: dout}
    got = gpu.run("layernorm", "layernorm_backward_dx", params, saved | {8: nans(rows, C)},
                  (rows, 1, 1), out=[8])[8]
    check("layernorm", got, dx)
    got = gpu.run("layernorm", "layernorm_backward_dx", params | {"flags": 2}, saved | {8: dx0}, (rows, 1, 1),
                  out=[8])[8]
    check("layernorm", got, dx + dx0)
    del saved[2]
    got = gpu.run("layernorm", "layernorm_backward_params", params, saved | {9: nans(C), 10: nans(C)},
                  (-(-C // 32), 1, 1), out=[9, 10])
    check("layernorm", got[9], dw)
    check("layernorm", got[10], db)
    # Split over S runs of rows (the engine does this for many rows): S partial sums per column.
    S = min(rows, 5)
    got = gpu.run("layernorm", "layernorm_backward_params", params,
                  saved | {9: nans(S, C), 10: nans(S, C)}, (-(-C // 32), S, 1), out=[9, 10])
    check("layernorm", got[9].reshape(S, C).astype(np.float64).sum(0), dw)
    check("layernorm", got[10].reshape(S, C).astype(np.float64).sum(0), db)


# ---------------------------------------------------------------------------- gelu

@pytest.mark.parametrize("n", [1, 1000, 70_001])
def test_gelu(rng, n):
    x = randn(rng, n) * 3
    dy = randn(rng, n)
    ref, cdf = model.gelu_forward(x.astype(np.float64))
    out = gpu.run("gelu", "gelu_forward", dict(n=n), {1: x, 2: nans(n)}, gpu.groups_1d(n), out=[2])[2]
    check("gelu", out, ref)
    out = gpu.run("gelu", "gelu_backward", dict(n=n), {1: x, 3: dy, 4: nans(n)}, gpu.groups_1d(n), out=[4])[4]
    check("gelu", out, model.gelu_backward(dy.astype(np.float64), x.astype(np.float64), cdf))


@pytest.mark.parametrize("n", [4, 1000, 70_000])
def test_gelu_vec4_gives_the_scalar_kernels_bits(rng, n):
    """The vec4 entry points (n a multiple of 4) compute each element as the scalar ones do."""
    x, dy = randn(rng, n) * 3, randn(rng, n)
    for entry, bindings, o in [("gelu_forward", {1: x, 2: nans(n)}, 2), ("gelu_backward", {1: x, 3: dy, 4: nans(n)}, 4)]:
        scalar = gpu.run("gelu", entry, dict(n=n), bindings, gpu.groups_1d(n), out=[o])[o]
        vec4 = gpu.run("gelu", entry + "_vec4", dict(n=n), bindings, gpu.groups_1d(n // 4), out=[o])[o]
        assert not np.isnan(scalar).any()
        np.testing.assert_array_equal(vec4, scalar)


def test_gelu_is_relatively_accurate_in_the_tails():
    """Φ comes from an erfc fit with a relative error bound, so x·Φ(x) keeps its relative
    accuracy far into the negative tail, where it is tiny. f32 exp of a large argument adds
    ~x²·6e-8 there. Compared with erfc in float64 (the reference's 1 + erf form cancels to 0)."""
    x = np.linspace(-12, 12, 48_001, dtype=np.float32)
    x = x[x != 0]
    out = gpu.run("gelu", "gelu_forward", dict(n=x.size), {1: x, 2: nans(x.size)}, gpu.groups_1d(x.size), out=[2])[2]
    x64 = x.astype(np.float64)
    exact = x64 * 0.5 * np.vectorize(math.erfc)(-x64 / math.sqrt(2.0))
    rel = np.abs(out - exact) / np.abs(exact)
    bound = 1e-6 + 1.5e-7 * x64**2
    worst = np.argmax(rel / bound)
    assert (rel <= bound).all(), f"relative error {rel[worst]:.3g} at x={x[worst]} over {bound[worst]:.3g}"


# ---------------------------------------------------------------------------- attention

# (B, T, C, n_head). The kernels work in blocks of 64 positions, 16 head columns per score step and
# 32 per output group: T = 1, inside a block (7, 100), at one (64) and past one (65, 70, 129, 130);
# head sizes below a step (4, 5), odd (5, 33, 99), past a group (33, 80) and the largest, the shaders'
# MAX_HEAD_DIM (128, the limit the engine enforces too); then every preset's own layer.
MAX_HEAD_DIM = FACTS["wgsl"]["consts"]["MAX_HEAD_DIM"]
ATTN_SHAPES = [(1, 1, 8, 2), (2, 7, 12, 3), (3, 100, 15, 3), (1, 70, 64, 1), (2, 64, 66, 2), (1, 129, 99, 1),
               (1, 65, 160, 2), (1, 130, 2 * MAX_HEAD_DIM, 2)]
ATTN_SHAPES += [(1, p["block_size"], p["n_embd"], p["n_head"]) for p in PRESETS]
# Each shape with the override HEAD of the table's plain attention ops, and of its _64 ops where D fits.
ATTN_CASES = [(*s, head) for s in ATTN_SHAPES for head in (MAX_HEAD_DIM, 64) if s[2] // s[3] <= head]


def attention_lse(q, k, n_head):
    B, T, C = q.shape
    qh, kh = (x.reshape(B, T, n_head, -1).transpose(0, 2, 1, 3) for x in (q, k))
    scores = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(C // n_head)
    scores = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, scores)
    top = scores.max(-1, keepdims=True)
    return (top + np.log(np.exp(scores - top).sum(-1, keepdims=True)))[..., 0]


@pytest.mark.parametrize("B,T,C,H,head", ATTN_CASES)
def test_attention(rng, B, T, C, H, head):
    q, k, v, dy = (randn(rng, B, T, C) for _ in range(4))
    params = dict(B=B, T=T, C=C, n_head=H)
    groups = (-(-T // 64), B * H, 1)
    HEAD = {"HEAD": head}
    y_ref, cache = model.attention_forward(*f64(q, k, v), H)
    r = gpu.run("attention", "attention_forward", params,
                {1: q, 2: k, 3: v, 4: nans(B, T, C), 5: nans(B, H, T)}, groups, out=[4, 5], constants=HEAD)
    check("attention", r[4], y_ref)
    check("attention", r[5], attention_lse(*f64(q, k), H))

    y, lse = r[4].reshape(B, T, C), r[5]
    delta = gpu.run("attention", "attention_backward_delta", params, {6: dy, 11: y, 7: nans(B, H, T)},
                    groups, out=[7])[7]
    dq_ref, dk_ref, dv_ref = model.attention_backward(dy.astype(np.float64), cache, H)
    saved = {1: q, 2: k, 3: v, 6: dy, 12: lse, 13: delta}
    dq = gpu.run("attention", "attention_backward_dq", params, saved | {8: nans(B, T, C)}, groups, out=[8], constants=HEAD)[8]
    # With one position, dS = P∘(dP − delta) cancels exactly and dq = dk = 0: judge the rounding
    # left over against the size of the cancelled terms, |dy|·|v| (dP) times |k| (or |q|), scaled.
    floor = np.abs(dy).max() * np.abs(v).max() * max(np.abs(q).max(), np.abs(k).max()) / math.sqrt(C // H) if T == 1 else 1e-30
    check("attention", dq, dq_ref, floor)
    got = gpu.run("attention", "attention_backward_dkdv", params, saved | {9: nans(B, T, C), 10: nans(B, T, C)},
                  groups, out=[9, 10], constants=HEAD)
    check("attention", got[9], dk_ref, floor)
    check("attention", got[10], dv_ref)


# ---------------------------------------------------------------------------- decode

# (pos, T, C, n_head): the first position, inside one chunk of 256 keys, its last key (255), the
# first of the next (256) and past it; heads as in ATTN_SHAPES, and heads that leave invocations of
# a workgroup without a column (256 / D groups of D: D 5, 80, 96, 99); then every preset's last position.
DECODE_SHAPES = [(0, 4, 8, 2), (6, 7, 15, 3), (127, 130, 99, 1), (128, 130, 2 * MAX_HEAD_DIM, 2), (200, 256, 160, 2)]
DECODE_SHAPES += [(255, 258, 2 * MAX_HEAD_DIM, 2), (256, 258, 96, 1), (300, 320, 192, 2)]
DECODE_SHAPES += [(p["block_size"] - 1, p["block_size"], p["n_embd"], p["n_head"]) for p in PRESETS]


@pytest.mark.parametrize("pos,T,C,H", DECODE_SHAPES)
def test_attention_decode_is_the_last_row_of_causal_attention(rng, pos, T, C, H):
    q, k, v = (randn(rng, 1, pos + 1, C) for _ in range(3))
    y_ref, _ = model.attention_forward(*f64(q, k, v), H)
    cache_k, cache_v = nans(T, C), nans(T, C)  # rows past pos are never read
    cache_k[:pos], cache_v[:pos] = k[0, :pos], v[0, :pos]
    at = np.array([pos, 0], np.uint32)
    got = gpu.run("decode", "attention_decode", dict(C=C, n_head=H),
                  {1: q[0, pos], 2: k[0, pos], 3: v[0, pos], 4: cache_k, 5: cache_v, 6: nans(C), 7: at}, (H, 1, 1), out=[4, 5, 6])
    check("decode", got[6], y_ref[0, pos])
    for name, cache, x in (("keys", got[4], k), ("values", got[5], v)):
        assert (cache.reshape(T, C)[: pos + 1] == x[0]).all(), f"the cache's {name} must gain row {pos} and keep the others"


def test_embedding_decode_takes_its_token_and_position_from_the_buffer(rng):
    V, T, C = FACTS["vocab_size"], 9, 70
    wte, wpe = randn(rng, V, C), randn(rng, T, C)
    for pos, token in ((0, 3), (8, 255)):
        got = gpu.run("decode", "embedding_decode", dict(C=C, n_head=1),
                      {6: nans(C), 7: np.array([pos, token], np.uint32), 8: wte, 9: wpe}, (-(-C // 128), 1, 1), out=[6])[6]
        check("decode", got, f64(wte)[0][token] + f64(wpe)[0][pos])


# ---------------------------------------------------------------------------- embedding

EMB_SHAPES = [(1, 1, 3), (3, 17, 70)] + [(2, p["block_size"], p["n_embd"]) for p in PRESETS]


def test_embedding_gradient_of_a_few_tokens_everywhere(rng):
    """Three tokens over 900 positions: most of each chunk of 256 matches, over several chunks and
    runs, with C past one workgroup's 256 columns."""
    B, T, C, V = 3, 300, 300, FACTS["vocab_size"]
    tokens = rng.integers(0, 3, B * T).astype(np.uint32)
    dout = randn(rng, B, T, C)
    dwte, _ = model.encoder_backward(dout.astype(np.float64), tokens.astype(np.int64).reshape(B, T), (V, C), (T, C))
    for S in (1, 2):
        got = gpu.run("embedding", "embedding_backward_wte", dict(B=B, T=T, C=C, V=V, flags=0),
                      {1: tokens, 5: dout, 6: nans(S, V, C)}, (-(-C // 256), V, S), out=[6])[6]
        check("embedding", got.reshape(S, V, C).astype(np.float64).sum(0), dwte)


@pytest.mark.parametrize("B,T,C", EMB_SHAPES)
def test_embedding(rng, B, T, C):
    V, block = FACTS["vocab_size"], T + 5  # wpe has more rows than T: only the first T are used
    tokens = rng.integers(0, V, (B, T)).astype(np.uint32)
    tokens.ravel()[: min(tokens.size, 5)] = 7  # repeated tokens must sum, not overwrite
    wte, wpe, dout = randn(rng, V, C), randn(rng, block, C), randn(rng, B, T, C)
    params = dict(B=B, T=T, C=C, V=V, flags=0)
    out = gpu.run("embedding", "embedding_forward", params, {1: tokens, 2: wte, 3: wpe, 4: nans(B, T, C)},
                  gpu.groups_1d(B * T * C), out=[4])[4]
    check("embedding", out, model.encoder_forward(wte, wpe, tokens.astype(np.int64)))

    dwte, dwpe = model.encoder_backward(dout.astype(np.float64), tokens.astype(np.int64), wte.shape, wpe.shape)
    got = gpu.run("embedding", "embedding_backward_wte", params, {1: tokens, 5: dout, 6: nans(V, C)},
                  (-(-C // 256), V, 1), out=[6])[6]
    check("embedding", got, dwte)
    dwte0 = randn(rng, V, C)
    got = gpu.run("embedding", "embedding_backward_wte", params | {"flags": 2}, {1: tokens, 5: dout, 6: dwte0},
                  (-(-C // 256), V, 1), out=[6])[6]
    check("embedding", got, dwte + dwte0)
    # Split over S runs of positions (the engine does this for long batches): S partial gradients.
    S = min(B * T, 3)
    got = gpu.run("embedding", "embedding_backward_wte", params, {1: tokens, 5: dout, 6: nans(S, V, C)},
                  (-(-C // 256), V, S), out=[6])[6]
    check("embedding", got.reshape(S, V, C).astype(np.float64).sum(0), dwte)
    start = np.full((block, C), 5.0, np.float32)
    got = gpu.run("embedding", "embedding_backward_wpe", params, {5: dout, 7: start},
                  gpu.groups_1d(T * C), out=[7])[7].reshape(block, C)
    check("embedding", got[:T], dwpe[:T])
    assert (got[T:] == 5.0).all(), "rows of wpe past T must be left alone"


def test_elementwise_grid_wraps_past_65535_workgroups(rng):
    n = 65536 * 256 + 300  # needs a second row of workgroups
    x = np.linspace(-4, 4, n, dtype=np.float32)  # cheaper to make than randn at this size
    groups = gpu.groups_1d(n)
    assert groups[1] == 2
    out = gpu.run("gelu", "gelu_forward", dict(n=n), {1: x, 2: nans(n)}, groups, out=[2])[2]
    check("gelu", out, model.gelu_forward(x.astype(np.float64))[0])


# ---------------------------------------------------------------------------- cross-entropy

@pytest.mark.parametrize("B,T", [(1, 1), (3, 7), (16, 64)])
def test_crossentropy(rng, B, T):
    V = FACTS["vocab_size"]
    rows = B * T
    logits = randn(rng, B, T, V) * 4
    targets = rng.integers(0, V, (B, T)).astype(np.uint32)
    loss_ref, probs = model.crossentropy_forward(logits.astype(np.float64), targets.astype(np.int64))
    params = dict(rows=rows, V=V)
    r = gpu.run("crossentropy", "crossentropy_forward", params,
                {1: logits, 2: targets, 3: nans(rows), 4: nans(rows)}, (rows, 1, 1), out=[3, 4])
    l64 = logits.astype(np.float64).reshape(rows, V)
    lse_ref = np.log(np.exp(l64 - l64.max(1, keepdims=True)).sum(1)) + l64.max(1)
    check("crossentropy", r[4], lse_ref)
    check("crossentropy", r[3], lse_ref - l64[np.arange(rows), targets.ravel()])
    mean = gpu.run("crossentropy", "crossentropy_mean", params, {7: r[3], 8: nans(1)}, (1, 1, 1), out=[8])[8]
    check("crossentropy", mean, [loss_ref])
    dlogits = gpu.run("crossentropy", "crossentropy_backward", params,
                      {1: logits, 2: targets, 5: r[4], 6: nans(rows, V)}, (rows, 1, 1), out=[6])[6]
    check("crossentropy", dlogits, model.crossentropy_backward(probs, targets.astype(np.int64)))


# ---------------------------------------------------------------------------- optimizer

OPT = FACTS["optimizer"]


def optimizer_params(n=0, n_partials=0, offset=0, lr=0.0, weight_decay=0.0, step=1):
    return dict(n=n, n_partials=n_partials, offset=offset, grad_clip=OPT["grad_clip"], lr=lr, beta1=OPT["beta1"],
                beta2=OPT["beta2"], eps=OPT["eps"], weight_decay=weight_decay, bc1=1 - OPT["beta1"] ** step,
                bc2=1 - OPT["beta2"] ** step)


def gpu_grad_norm(grad, n_partials):
    n = grad.size
    partials = gpu.run("optimizer", "grad_norm_partial", optimizer_params(n, n_partials),
                       {1: grad, 2: nans(n_partials)}, (n_partials, 1, 1), out=[2])[2]
    return gpu.run("optimizer", "grad_norm_final", optimizer_params(n, n_partials),
                   {3: partials, 4: nans(2)}, (1, 1, 1), out=[4])[4]


@pytest.mark.parametrize("n,n_partials,size", [(1, 1, 0.01), (1000, 3, 0.01), (300_000, 1024, 1.0)])
def test_grad_norm_and_clip(rng, n, n_partials, size):
    grad = randn(rng, n) * size
    norm, scale = gpu_grad_norm(grad, n_partials)
    grads = {"all": grad.astype(np.float64)}
    ref_norm = train.clip_grad_norm(grads, OPT["grad_clip"])
    check("optimizer", [norm], [ref_norm])
    check("optimizer", [scale], [grads["all"][0] / grad[0]])


def test_adamw_matches_reference_over_steps(rng):
    """Three steps on a 2-D (decayed) and a 1-D (not decayed) tensor laid out back to back,
    gradients clipped by the GPU's own norm."""
    tc = train.TrainConfig.from_preset("tiny")
    shapes = {"w": (33, 17), "b": (17,)}
    params = {k: randn(rng, *s) for k, s in shapes.items()}
    m = {k: np.zeros(s) for k, s in shapes.items()}
    v = {k: np.zeros(s) for k, s in shapes.items()}
    flat_p = np.concatenate([params[k].ravel() for k in shapes])
    flat_m, flat_v = np.zeros_like(flat_p), np.zeros_like(flat_p)
    ref_p = {k: x.astype(np.float64) for k, x in params.items()}
    for step in (1, 2, 3):
        grads = {k: randn(rng, *s) * 2 for k, s in shapes.items()}
        flat_g = np.concatenate([grads[k].ravel() for k in shapes])
        norm = gpu_grad_norm(flat_g, 2)
        lr = 1e-2 * step
        offset = 0
        for k, s in shapes.items():
            n = int(np.prod(s))
            wd = tc.weight_decay if len(s) == 2 else 0.0
            r = gpu.run("optimizer", "adamw", optimizer_params(n, 0, offset, lr, wd, step),
                        {1: flat_g, 5: norm, 6: flat_p, 7: flat_m, 8: flat_v}, gpu.groups_1d(n), out=[6, 7, 8])
            flat_p, flat_m, flat_v = r[6], r[7], r[8]
            offset += n
        ref_g = {k: g.astype(np.float64) for k, g in grads.items()}
        train.clip_grad_norm(ref_g, tc.grad_clip)
        train.adamw_update(ref_p, ref_g, m, v, step, lr, tc)
        check("optimizer", flat_p, np.concatenate([ref_p[k].ravel() for k in shapes]))
        check("optimizer", flat_m, np.concatenate([m[k].ravel() for k in shapes]))


# ---------------------------------------------------------------------------- determinism

def test_kernels_with_reductions_are_bitwise_deterministic(rng):
    B, T, C, H = 2, 33, 24, 3
    q, k, v, dy = (randn(rng, B, T, C) for _ in range(4))
    lse = rng.standard_normal(B * H * T).astype(np.float32) + 5
    delta = randn(rng, B * H * T)
    args = {1: q, 2: k, 3: v, 6: dy, 12: lse, 13: delta, 9: nans(B, T, C), 10: nans(B, T, C)}
    runs = [gpu.run("attention", "attention_backward_dkdv", dict(B=B, T=T, C=C, n_head=H), args, (1, B * H, 1),
                    out=[9, 10])
            for _ in range(2)]
    assert all(np.array_equal(runs[0][i], runs[1][i]) for i in (9, 10))
    tokens = rng.integers(0, 4, B * T).astype(np.uint32)
    args = {1: tokens, 5: dy, 6: nans(256, C)}
    runs = [gpu.run("embedding", "embedding_backward_wte", dict(B=B, T=T, C=C, V=256, flags=0), args, (1, 256, 1),
                    out=[6])[6]
            for _ in range(2)]
    assert np.array_equal(runs[0], runs[1])


# ---------------------------------------------------------------------------- sampling

def derive_seed(seed: int, stream: int) -> int:
    """webapp/engine/rng.ts deriveSeed (facts.json wgsl.consts RNG_*), the oracle of sample.wgsl's hash."""
    c, m = FACTS["wgsl"]["consts"], 0xFFFFFFFF
    h = (((seed ^ c["RNG_SEED_XOR"]) * c["RNG_SEED_MUL"]) ^ (stream * c["RNG_STREAM_MUL"])) & m
    h ^= h >> 16
    h = (h * c["RNG_MIX1"]) & m
    h ^= h >> 15
    h = (h * c["RNG_MIX2"]) & m
    return h ^ (h >> 16)


class Fixed:
    """A stand-in generator for model.pick_token that draws one given uniform."""
    def __init__(self, u: float):
        self.u = u

    def random(self) -> float:
        return self.u


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.0, 0, 1.0), (1.0, 0, 1.0), (0.8, 40, 1.0), (1.0, 5, 1.0),
                                                     (1.3, 0, 0.9), (1.0, 12, 0.7), (2.0, 0, 1e-6)])
def test_sample_token_draws_as_the_reference_rule_with_the_counter_hash(rng, temperature, top_k, top_p):
    """Each dispatch picks one token from logits row state[4] by the reference's rule (model.pick_token)
    with the uniform of (seed, counter + drawn), feeds it back as [position + 1, token], and appends
    it to drawn; logits with ties at the top and at the k-th value, where the rule's order decides."""
    V = FACTS["vocab_size"]
    logits = (randn(rng, V) * 2).astype(np.float32)
    logits[[3, 200]] = logits.max() + 1  # a tie for the argmax: the lower id wins
    logits[[10, 11, 12]] = np.sort(logits)[-6]  # a tie at the 5th-6th largest
    seed, counter, n = 1234, 77, 40
    # The first draw reads row 1 (as after a prefill of two tokens), the rest row 0 (a decode's).
    state = np.array([9, 0, 0, counter, 1], np.uint32)
    other = randn(rng, V)
    drawn = np.zeros(n, np.uint32)
    params = dict(V=V, top_k=top_k, temperature=temperature, top_p=top_p, seed=seed)
    want, margins = [], []
    for i in range(n):
        rows = np.stack([other, logits] if i == 0 else [logits, other])
        out = gpu.run("sample", "sample_token", params, {1: rows, 2: state, 3: drawn}, (1, 1, 1), out=[2, 3])
        state, drawn = out[2], out[3]
        u = (derive_seed(seed, counter + i) >> 8) / 2**24
        want.append(model.pick_token(logits, temperature, top_k, Fixed(u), top_p))
        if temperature > 0:
            w = model.draw_weights(logits, temperature, top_k, top_p)
            margins.append(np.abs(np.cumsum(w / w.sum()) - u).min())
    assert min(margins, default=1) > 1e-5, "a draw fell within rounding of a boundary: choose another seed"
    assert drawn.tolist() == want
    assert state[:3].tolist() == [9 + n, want[-1], n] and state[4] == 0
    if temperature == 0:
        assert set(want) == {3}
