// lib/matmul_tile.wgsl: the tiled product of both matmul modules, C = op(A)·op(B) (+ bias) (+ C),
// and their entry points; matmul.wgsl (any shape) and matmul_vec4.wgsl (16-byte loads) differ
// only in their bindings, in `fetch` (one step's 4 values of A and of B for an invocation) and in
// `store4` (4 adjacent elements of a row of C), which each defines.
//
// matmul_nn  C[M,N] = A[M,K]·B[K,N]     linear forward y = x·W (+ b)
// matmul_nt  C[M,N] = A[M,K]·B[N,K]ᵀ    input gradient dx = dy·Wᵀ, tied head logits = x·wteᵀ
// matmul_tn  C[M,N] = A[K,M]ᵀ·B[K,N]    weight gradient dW = xᵀ·dy
//   workgroup 256; dispatch (ceil(N/BLOCK), P·ceil(M/BLOCK), S).
//   Stacked products (lib/matmul_block.wgsl): P products of one A, each with its own B, bias and C
//   at equal strides (the graph's q, k and v, whose weights and activations lie one after another).
//   Split K: with S > 1, workgroup z sums its own run of K and stores to c[z·P·M·N ..], S partial
//   products that colsum then adds in a fixed order (deterministic, no atomics); c holds
//   S·P·M·N elements and flags must be 0 but for GRAD_A and GRAD_B.
//
// Params: four u32: M, N, K, flags (bit 0 BIAS: add bias[n]; bit 1 ACCUMULATE: C += result; GRAD_A
// and GRAD_B mark an operand that is a gradient, which the f32 products need not know).
// Override BLOCK: the edge of the square block of C a workgroup computes, 128 or 64.
//
// Invocation (ty, tx) = (t/16, t%16) computes QUADS x QUADS quads of 4x4 outputs, 64 rows and
// columns apart, one vec4 register per quad row: 8x8 outputs in a 128 block, 4x4 in a 64 block.
// A and B pass through workgroup memory BK k-steps at a time, each invocation staging one vec4 of
// each a step, stored k-major so the inner loop reads both as vec4, in two buffers (16 KiB, the
// WebGPU default limit): the loads of the next step are issued before the arithmetic of this one,
// and one barrier a step suffices. Out-of-range elements load as 0 and are not stored.
// Measured variants and their numbers: bench/bench_matmul.py, bench/matmul/, content/docs/kernels.md.
//
// The products are `staged` (lib/matmul_staged.wgsl): `elem` in the plain modules, whose registers
// hold the whole run of K. The shader-f16 lever #replaces that file to multiply in f16: a sum of f16
// products over one buffer (BK steps) is short enough to stay accurate, so with SPILL each buffer's
// sums are added into `elem` (f32) accumulators and restarted; f16 over all of K is not. The tiles
// stay `elem` in workgroup memory, converted as they are read: staged as f16, invocations would
// store 16-bit halves of one 32-bit word side by side, which a compiler may implement as a
// read-modify-write of the word (on the H200 through Dawn, the f16-staged tiles gave logits off by
// 50 times the gate's budget; on lavapipe they matched).

#include "lib/split.wgsl"
#include "lib/matmul_staged.wgsl"
#include "lib/matmul_block.wgsl"

struct Params {
  M: u32,
  N: u32,
  K: u32,
  flags: u32,
}

const TILE = 256u; // vec4s per buffer, one per invocation

override BLOCK: u32 = 128u;
override QUADS = BLOCK / 64u;
override BK = 1024u / BLOCK; // k-steps per buffer: BK rows of ROW vec4s make TILE
override ROW = BLOCK / 4u;

@group(0) @binding(0) var<uniform> p: Params;

var<workgroup> tile_a: array<vec4<elem>, 512>; // 2 buffers x [BK][ROW], k-major
var<workgroup> tile_b: array<vec4<elem>, 512>;

struct Fetched {
  a: vec4<elem>,
  b: vec4<elem>,
}

// Where invocation t's 4 values of an operand start in the step at k0, as (row, k) of its
// [rows, K] view (rows: m for A, n for B): 4 consecutive k where K is contiguous in memory
// (A, Bᵀ), else 4 consecutive rows (Aᵀ, B).
fn origin(t: u32, r0: u32, k0: u32, k_contiguous: bool) -> vec2<u32> {
  if (k_contiguous) { return vec2<u32>(r0 + t / (BK / 4u), k0 + (t % (BK / 4u)) * 4u); }
  return vec2<u32>(r0 + (t % ROW) * 4u, k0 + t / ROW);
}

// Stores a step's operands k-major in buffer buf: as fetched where the 4 values run along the
// rows (Aᵀ, B), else one value in each of 4 k-rows, at vec4 i (+ ROW per row), component c.
// Written out: as a loop over the components it took a Huge step from 50.4 to 53 ms (H200).
fn stash(t: u32, buf: u32, f: Fetched, a_trans: bool, b_trans: bool) {
  let base = buf * TILE;
  let at = origin(t, 0u, 0u, true);
  let i = base + at.y * ROW + at.x / 4u;
  let c = at.x % 4u;
  if (a_trans) {
    tile_a[base + t] = f.a;
  } else {
    tile_a[i][c] = f.a.x;
    tile_a[i + ROW][c] = f.a.y;
    tile_a[i + 2u * ROW][c] = f.a.z;
    tile_a[i + 3u * ROW][c] = f.a.w;
  }
  if (b_trans) {
    tile_b[i][c] = f.b.x;
    tile_b[i + ROW][c] = f.b.y;
    tile_b[i + 2u * ROW][c] = f.b.z;
    tile_b[i + 3u * ROW][c] = f.b.w;
  } else {
    tile_b[base + t] = f.b;
  }
}

fn store_quad(at: Block, m: u32, n: u32, c0: vec4<elem>, c1: vec4<elem>, c2: vec4<elem>, c3: vec4<elem>) {
  store4(at, m, n, c0);
  store4(at, m + 1u, n, c1);
  store4(at, m + 2u, n, c2);
  store4(at, m + 3u, n, c3);
}

fn matmul(wg: vec3<u32>, groups: vec3<u32>, t: u32, a_trans: bool, b_trans: bool) {
  let ks = split_range(wg.z, groups.z, p.K, BK); // whole buffers: every split but the last ends on one
  let at = block_of(wg, groups);
  let m0 = at.m0;
  let n0 = at.n0;
  let tx = t % 16u;
  let ty = t / 16u;
  // c<r><j>: the invocation's row r (m0 + 4ty + r, or m0 + 64 + 4ty + r - 4 from r = 4 on) at
  // columns n0 + 4tx .. (j = 0) or n0 + 64 + 4tx .. (j = 1); a 64 block uses c00 .. c30. Named
  // registers: as arrays of quads through a helper, a Huge step took 1% longer (H200).
  // s<r><j> sums the staged products; c<r><j> takes them with SPILL (else it stays 0, folded away).
  var s00 = vec4<staged>(0.0); var s01 = vec4<staged>(0.0);
  var s10 = vec4<staged>(0.0); var s11 = vec4<staged>(0.0);
  var s20 = vec4<staged>(0.0); var s21 = vec4<staged>(0.0);
  var s30 = vec4<staged>(0.0); var s31 = vec4<staged>(0.0);
  var s40 = vec4<staged>(0.0); var s41 = vec4<staged>(0.0);
  var s50 = vec4<staged>(0.0); var s51 = vec4<staged>(0.0);
  var s60 = vec4<staged>(0.0); var s61 = vec4<staged>(0.0);
  var s70 = vec4<staged>(0.0); var s71 = vec4<staged>(0.0);
  var c00 = vec4<elem>(0.0); var c01 = vec4<elem>(0.0);
  var c10 = vec4<elem>(0.0); var c11 = vec4<elem>(0.0);
  var c20 = vec4<elem>(0.0); var c21 = vec4<elem>(0.0);
  var c30 = vec4<elem>(0.0); var c31 = vec4<elem>(0.0);
  var c40 = vec4<elem>(0.0); var c41 = vec4<elem>(0.0);
  var c50 = vec4<elem>(0.0); var c51 = vec4<elem>(0.0);
  var c60 = vec4<elem>(0.0); var c61 = vec4<elem>(0.0);
  var c70 = vec4<elem>(0.0); var c71 = vec4<elem>(0.0);
  stash(t, 0u, fetch(t, at, ks.x, ks.y, a_trans, b_trans), a_trans, b_trans);
  workgroupBarrier();
  var buf = 0u;
  for (var k0 = ks.x; k0 < ks.y; k0 += BK) {
    let more = k0 + BK < ks.y;
    var next = Fetched(vec4<elem>(0.0), vec4<elem>(0.0));
    if (more) { next = fetch(t, at, k0 + BK, ks.y, a_trans, b_trans); }
    let base = buf * TILE;
    for (var kk = 0u; kk < BK; kk++) {
      // All four reads before the arithmetic (a1 and b1 go unused in a 64 block).
      let a0 = vec4<staged>(tile_a[base + kk * ROW + ty]);
      let a1 = vec4<staged>(tile_a[base + kk * ROW + 16u + ty]);
      let b0 = vec4<staged>(tile_b[base + kk * ROW + tx]);
      let b1 = vec4<staged>(tile_b[base + kk * ROW + 16u + tx]);
      s00 += a0.x * b0; s10 += a0.y * b0; s20 += a0.z * b0; s30 += a0.w * b0;
      if (QUADS > 1u) {
        s01 += a0.x * b1; s11 += a0.y * b1; s21 += a0.z * b1; s31 += a0.w * b1;
        s40 += a1.x * b0; s50 += a1.y * b0; s60 += a1.z * b0; s70 += a1.w * b0;
        s41 += a1.x * b1; s51 += a1.y * b1; s61 += a1.z * b1; s71 += a1.w * b1;
      }
    }
    if (SPILL) {
      c00 += vec4<elem>(s00); c10 += vec4<elem>(s10); c20 += vec4<elem>(s20); c30 += vec4<elem>(s30);
      s00 = vec4<staged>(0.0); s10 = vec4<staged>(0.0); s20 = vec4<staged>(0.0); s30 = vec4<staged>(0.0);
      if (QUADS > 1u) {
        c01 += vec4<elem>(s01); c11 += vec4<elem>(s11); c21 += vec4<elem>(s21); c31 += vec4<elem>(s31);
        c40 += vec4<elem>(s40); c50 += vec4<elem>(s50); c60 += vec4<elem>(s60); c70 += vec4<elem>(s70);
        c41 += vec4<elem>(s41); c51 += vec4<elem>(s51); c61 += vec4<elem>(s61); c71 += vec4<elem>(s71);
        s01 = vec4<staged>(0.0); s11 = vec4<staged>(0.0); s21 = vec4<staged>(0.0); s31 = vec4<staged>(0.0);
        s40 = vec4<staged>(0.0); s50 = vec4<staged>(0.0); s60 = vec4<staged>(0.0); s70 = vec4<staged>(0.0);
        s41 = vec4<staged>(0.0); s51 = vec4<staged>(0.0); s61 = vec4<staged>(0.0); s71 = vec4<staged>(0.0);
      }
    }
    if (more) { stash(t, 1u - buf, next, a_trans, b_trans); }
    workgroupBarrier();
    buf = 1u - buf;
  }
  let r = m0 + ty * 4u;
  let q = n0 + tx * 4u;
  if (!SPILL) { // the staged sums hold the whole run (elem and staged are one type)
    c00 = vec4<elem>(s00); c10 = vec4<elem>(s10); c20 = vec4<elem>(s20); c30 = vec4<elem>(s30);
    c01 = vec4<elem>(s01); c11 = vec4<elem>(s11); c21 = vec4<elem>(s21); c31 = vec4<elem>(s31);
    c40 = vec4<elem>(s40); c50 = vec4<elem>(s50); c60 = vec4<elem>(s60); c70 = vec4<elem>(s70);
    c41 = vec4<elem>(s41); c51 = vec4<elem>(s51); c61 = vec4<elem>(s61); c71 = vec4<elem>(s71);
  }
  store_quad(at, r, q, c00, c10, c20, c30);
  if (QUADS > 1u) {
    store_quad(at, r, q + 64u, c01, c11, c21, c31);
    store_quad(at, r + 64u, q, c40, c50, c60, c70);
    store_quad(at, r + 64u, q + 64u, c41, c51, c61, c71);
  }
}

// The builtins stay apart: Tint's uniformity analysis would take a struct holding the local
// index as non-uniform as a whole, workgroup_id with it.
@compute @workgroup_size(256)
fn matmul_nn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul(wg, nwg, t, false, false);
}

@compute @workgroup_size(256)
fn matmul_nt(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul(wg, nwg, t, false, true);
}

@compute @workgroup_size(256)
fn matmul_tn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul(wg, nwg, t, true, false);
}
