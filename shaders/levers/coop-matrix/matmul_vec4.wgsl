// levers/coop-matrix/matmul_vec4.wgsl: matmul_vec4.wgsl's three products on the GPU's matrix units
// (Chromium's subgroup matrices, config f16 x f16 -> f32 at 16x16x16), for the coop-matrix lever
// (webapp/levers/coop-matrix/). The same bindings, params, entry points, stacked products, split
// and flags as the plain module; f32 in memory, rounded to f16 as a tile is staged, products summed in f32.
//
// A workgroup computes a BLOCK x BLOCK block of C (128, or 64 for grids too small to fill the GPU)
// with BLOCK / 16 subgroups of SUBGROUP invocations (the adapter's one subgroup size, an override
// the lever sets), each 32 rows by BLOCK / 2 columns as 2 x (BLOCK / 32) result matrices, over K
// in steps of BK = 64 or 32 (four or two matrix k-steps); the next step's global loads are issued
// before this step's products. A and B are staged in workgroup memory as the global layout has
// them, so each invocation converts 4 consecutive elements and writes whole words (two invocations
// writing the halves of one word raced on the H200, see lib/matmul_tile.wgsl); a transposed operand
// is then loaded column-major. Results leave through a 16x16 f32 scratch per subgroup so that bias,
// ACCUMULATE and the bounds apply as the plain store does (lib/matmul_vec4_store.wgsl).
// Out-of-range elements stage as 0. Workgroup memory: 48 KiB at BLOCK 128 and BK 64, 28 KiB at 128
// and 32, 14 KiB at 64 and 32 (webapp/levers/coop-matrix/lever.ts counts it to choose BK).
//
// Written for the robustness transform, which browsers apply and which tests every index: a matrix
// load or store goes untested only where its array, offset and stride are all constants, so the
// tiles are arrays of segments of 16 rows by 32 halves and every matrix a subgroup loads lies in
// one segment at offset 0 or 16, each load spelled out; and the stores that stage a tile clamp
// their indices where the transform can see the clamp, which proves the four halves of a vec4 in
// bounds and lets them go out as one 8-byte store. On the H200 (2026-12-05, a Huge training step)
// the matmuls took 14.9 ms with a flat tile, 13.6 with the stores' clamps alone, 13.2 with the
// segments alone, and 10.3 with both, the same bits each time.
//   workgroup (BLOCK / 16) * SUBGROUP; dispatch (ceil(N/BLOCK), P·ceil(M/BLOCK), S).

enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
requires subgroup_id;

#include "lib/split.wgsl"
#include "lib/matmul_block.wgsl"

struct Params {
  M: u32,
  N: u32,
  K: u32,
  flags: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> b: array<vec4<elem>>;

#include "lib/matmul_vec4_store.wgsl"

override SUBGROUP: u32 = 32u;
const T = 16u; // the config's M, N and K
const MAX_PER = 8u; // the most vec4s of each operand an invocation stages a step (PER)
override BLOCK: u32 = 128u; // the edge of the block of C a workgroup computes, 128 or 64
override SUBGROUPS = BLOCK / 16u; // each computes 32 rows by BLOCK / 2 columns of the block
override INVOCATIONS = SUBGROUPS * SUBGROUP;
override BK: u32 = 32u; // k per step, 32 or 64
override VECS = BLOCK * BK / 4u; // vec4s of A (BLOCK x BK) or of B (BK x BLOCK) in one step
override PER = VECS / INVOCATIONS; // one step's vec4s of each operand an invocation stages: 4 * BK / SUBGROUP
const SEG_ROW = 40u; // halves from one staged row to the next: 32 and 8 more, so a matrix load's rows fall in different banks
const SEG = 16u * SEG_ROW; // halves of a segment: 16 rows by 32 columns of a staged tile
override SEGS = BLOCK * BK / 512u; // segments of each operand a step

alias Left = subgroup_matrix_left<f16, T, T>; // <component, columns (K), rows (M)>
alias Right = subgroup_matrix_right<f16, T, T>; // <component, columns (N), rows (K)>
alias Result = subgroup_matrix_result<f32, T, T>;

var<workgroup> tile_a: array<array<f16, SEG>, SEGS>; // [m][k], or [k][m] for Aᵀ
var<workgroup> tile_b: array<array<f16, SEG>, SEGS>; // [k][n], or [n][k] for Bᵀ
var<workgroup> scratch: array<array<f32, T * T>, SUBGROUPS>; // one result matrix per subgroup on its way out

struct Staged {
  a: array<vec4<elem>, MAX_PER>, // PER of them
  b: array<vec4<elem>, MAX_PER>,
}

// Where the i-th vec4 of this invocation lies in a [rows][cols] block stored row by row.
fn slot(t: u32, i: u32, cols: u32) -> vec2<u32> {
  let v = t + i * INVOCATIONS;
  return vec2<u32>(v / (cols / 4u), (v % (cols / 4u)) * 4u);
}

// One step's A and B from global memory, 4 consecutive elements of the global layout a vec4:
// A as [BLOCK m][BK k] (or [BK k][BLOCK m] for Aᵀ), B as [BK k][BLOCK n] (or [BLOCK n][BK k] for Bᵀ).
fn fetch(t: u32, blk: Block, k0: u32, kend: u32, a_trans: bool, b_trans: bool) -> Staged {
  let m0 = blk.m0;
  let n0 = blk.n0;
  var s: Staged;
  for (var i = 0u; i < PER; i++) {
    s.a[i] = vec4<elem>(0.0);
    s.b[i] = vec4<elem>(0.0);
    if (a_trans) {
      let at = slot(t, i, BLOCK);
      let k = k0 + at.x;
      let m = m0 + at.y;
      if (k < kend && m < p.M) { s.a[i] = a[(k * p.M + m) / 4u]; }
    } else {
      let at = slot(t, i, BK);
      let m = m0 + at.x;
      let k = k0 + at.y;
      if (m < p.M && k < kend) { s.a[i] = a[(m * p.K + k) / 4u]; }
    }
    if (b_trans) {
      let at = slot(t, i, BK);
      let n = n0 + at.x;
      let k = k0 + at.y;
      if (n < p.N && k < kend) { s.b[i] = b[(blk.b + n * p.K + k) / 4u]; }
    } else {
      let at = slot(t, i, BLOCK);
      let k = k0 + at.x;
      let n = n0 + at.y;
      if (k < kend && n < p.N) { s.b[i] = b[(blk.b + k * p.N + n) / 4u]; }
    }
  }
  return s;
}

// The factor an operand is rounded to f16 at: a gradient of the mean loss over the batch's rows
// (flags GRAD_A, GRAD_B; rows: M, or K for Aᵀ·B) is about 1/rows in size, below f16's smallest
// normal (6e-5) for a batch of 16384 rows, so it is scaled by the power of two at or above rows
// first (exactly, with the inverse applied to the f32 result), which leaves it room up to 65504.
fn scale(grad: u32, a_trans: bool) -> f32 {
  if ((p.flags & grad) == 0u) { return 1.0; }
  return exp2(ceil(log2(f32(select(p.M, p.K, a_trans)))));
}

// Where element (x, y) of a staged [rows][cols] tile is: its segment, and its place there. A matrix
// at (x, y), multiples of 16, starts at place 0 or 16.
fn segment(x: u32, y: u32, cols: u32) -> vec2<u32> {
  return vec2<u32>((x / 16u) * (cols / 32u) + y / 32u, (x % 16u) * SEG_ROW + y % 32u);
}

// Where the i-th vec4 of this invocation goes in a staged [rows][cols] tile (its first half).
fn staged(t: u32, i: u32, cols: u32) -> vec2<u32> {
  let at = slot(t, i, cols);
  return segment(at.x, at.y, cols);
}

// The fetched vec4s into the tiles as f16, each invocation writing the 4 halves of its own. The
// min()s change no index (staged() gives a segment below SEGS and a multiple of 4 below SEG) but
// show the robustness transform that the four halves are in bounds and 8-byte aligned. They are
// taken here, where it looks, not in staged(): it cannot see into a call.
fn stash(t: u32, s: Staged, sa: f32, sb: f32, a_trans: bool, b_trans: bool) {
  for (var i = 0u; i < PER; i++) {
    let ja = staged(t, i, select(BK, BLOCK, a_trans));
    let ga = min(ja.x, SEGS - 1u);
    let ha = min(ja.y / 4u, SEG / 4u - 1u) * 4u;
    let x = vec4<f16>(s.a[i] * sa);
    tile_a[ga][ha] = x.x; tile_a[ga][ha + 1u] = x.y; tile_a[ga][ha + 2u] = x.z; tile_a[ga][ha + 3u] = x.w;
    let jb = staged(t, i, select(BLOCK, BK, b_trans));
    let gb = min(jb.x, SEGS - 1u);
    let hb = min(jb.y / 4u, SEG / 4u - 1u) * 4u;
    let y = vec4<f16>(s.b[i] * sb);
    tile_b[gb][hb] = y.x; tile_b[gb][hb + 1u] = y.y; tile_b[gb][hb + 2u] = y.z; tile_b[gb][hb + 3u] = y.w;
  }
}

// The left matrix at rows r.. and k-step kk.., the right one at k-step kk.. and columns q..., each
// load at a constant offset.
fn left(r: u32, kk: u32, a_trans: bool) -> Left {
  if (a_trans) {
    let s = segment(kk, r, BLOCK);
    if (s.y != 0u) { return subgroupMatrixLoad<Left, col_major>(&tile_a[s.x], 16u, SEG_ROW); }
    return subgroupMatrixLoad<Left, col_major>(&tile_a[s.x], 0u, SEG_ROW);
  }
  let s = segment(r, kk, BK);
  if (s.y != 0u) { return subgroupMatrixLoad<Left, row_major>(&tile_a[s.x], 16u, SEG_ROW); }
  return subgroupMatrixLoad<Left, row_major>(&tile_a[s.x], 0u, SEG_ROW);
}

fn right(kk: u32, q: u32, b_trans: bool) -> Right {
  if (b_trans) {
    let s = segment(q, kk, BK);
    if (s.y != 0u) { return subgroupMatrixLoad<Right, col_major>(&tile_b[s.x], 16u, SEG_ROW); }
    return subgroupMatrixLoad<Right, col_major>(&tile_b[s.x], 0u, SEG_ROW);
  }
  let s = segment(kk, q, BLOCK);
  if (s.y != 0u) { return subgroupMatrixLoad<Right, row_major>(&tile_b[s.x], 16u, SEG_ROW); }
  return subgroupMatrixLoad<Right, row_major>(&tile_b[s.x], 0u, SEG_ROW);
}

// A result matrix of this subgroup out through its scratch: 4 elements of a row per invocation
// and step, whatever the subgroup size.
fn emit(blk: Block, sg: u32, lane: u32, m: u32, n: u32, r: Result, unscale: f32) {
  subgroupMatrixStore<row_major>(&scratch[sg], 0u, r, T);
  workgroupBarrier();
  for (var e = lane * 4u; e < T * T; e += SUBGROUP * 4u) {
    store4(blk, m + e / T, n + e % T, vec4<elem>(scratch[sg][e], scratch[sg][e + 1u], scratch[sg][e + 2u], scratch[sg][e + 3u]) * unscale);
  }
  workgroupBarrier();
}

// The accumulators are named, not an array: indexed in a loop, an array of them ran at a third
// of the speed on the H200 (2026-12-02), as if it had left the registers.
fn matmul(wg: vec3<u32>, groups: vec3<u32>, t: u32, sg: u32, lane: u32, a_trans: bool, b_trans: bool) {
  let ks = split_range(wg.z, groups.z, p.K, BK);
  let blk = block_of(wg, groups);
  let m0 = blk.m0;
  let n0 = blk.n0;
  let wide = BLOCK > 64u; // four result columns a subgroup, else two
  let qm = (sg / 2u) * 32u; // this subgroup's 32 rows and BLOCK / 2 columns of the block
  let qn = (sg % 2u) * (BLOCK / 2u);
  var c00 = Result(); var c01 = Result(); var c02 = Result(); var c03 = Result();
  var c10 = Result(); var c11 = Result(); var c12 = Result(); var c13 = Result();
  let sa = scale(GRAD_A, a_trans);
  let sb = scale(GRAD_B, a_trans);
  var next = fetch(t, blk, ks.x, ks.y, a_trans, b_trans);
  for (var k0 = ks.x; k0 < ks.y; k0 += BK) {
    stash(t, next, sa, sb, a_trans, b_trans);
    workgroupBarrier();
    // The next step's loads go out before this step's products.
    if (k0 + BK < ks.y) { next = fetch(t, blk, k0 + BK, ks.y, a_trans, b_trans); }
    for (var kk = 0u; kk < BK; kk += T) {
      let a0 = left(qm, kk, a_trans);
      let a1 = left(qm + T, kk, a_trans);
      let b0 = right(kk, qn, b_trans);
      let b1 = right(kk, qn + T, b_trans);
      c00 = subgroupMatrixMultiplyAccumulate(a0, b0, c00);
      c01 = subgroupMatrixMultiplyAccumulate(a0, b1, c01);
      c10 = subgroupMatrixMultiplyAccumulate(a1, b0, c10);
      c11 = subgroupMatrixMultiplyAccumulate(a1, b1, c11);
      if (wide) {
        let b2 = right(kk, qn + 2u * T, b_trans);
        let b3 = right(kk, qn + 3u * T, b_trans);
        c02 = subgroupMatrixMultiplyAccumulate(a0, b2, c02);
        c03 = subgroupMatrixMultiplyAccumulate(a0, b3, c03);
        c12 = subgroupMatrixMultiplyAccumulate(a1, b2, c12);
        c13 = subgroupMatrixMultiplyAccumulate(a1, b3, c13);
      }
    }
    workgroupBarrier();
  }
  let m = m0 + qm;
  let n = n0 + qn;
  let unscale = 1.0 / (sa * sb);
  emit(blk, sg, lane, m, n, c00, unscale);
  emit(blk, sg, lane, m, n + T, c01, unscale);
  emit(blk, sg, lane, m + T, n, c10, unscale);
  emit(blk, sg, lane, m + T, n + T, c11, unscale);
  if (wide) {
    emit(blk, sg, lane, m, n + 2u * T, c02, unscale);
    emit(blk, sg, lane, m, n + 3u * T, c03, unscale);
    emit(blk, sg, lane, m + T, n + 2u * T, c12, unscale);
    emit(blk, sg, lane, m + T, n + 3u * T, c13, unscale);
  }
}

@compute @workgroup_size(INVOCATIONS)
fn matmul_nn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32,
             @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  matmul(wg, nwg, t, sg, lane, false, false);
}

@compute @workgroup_size(INVOCATIONS)
fn matmul_nt(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32,
             @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  matmul(wg, nwg, t, sg, lane, false, true);
}

@compute @workgroup_size(INVOCATIONS)
fn matmul_tn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32,
             @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  matmul(wg, nwg, t, sg, lane, true, false);
}
