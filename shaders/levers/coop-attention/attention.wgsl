// levers/coop-attention/attention.wgsl: attention.wgsl's forward, dQ and dK/dV on the GPU's matrix
// units (subgroup matrices, f16 x f16 -> f32 at 16x16x16), for the coop-attention lever
// (webapp/levers/coop-attention/), on heads of at most HEAD = 64 columns (the graph runs wider
// heads on the plain module). The same bindings, params and outputs; attention_backward_delta
// stays plain.
//
// Unlike the plain module's online softmax, the forward makes two passes over the keys: the first
// finds each row's max and sum, so the second forms exact probabilities and sums P·V into result
// matrices that never need rescaling (a result matrix cannot be scaled row by row). It computes
// the scores twice, which the matrix units pay for; the backward recomputes them from the lse as
// the plain module does.
//
// A workgroup of SUBGROUPS subgroups owns ROWS = 16 x SUBGROUPS rows of one (batch, head): query
// rows (forward, dQ) or key rows (dK/dV), 16 to each subgroup, which loads its rows of both owned
// operands once, as left matrices held in registers. The other side meets them 32 rows at a time
// (only the chunks the causal mask leaves), staged in workgroup memory as f16 [row][head column],
// rows PAD halves longer than HEAD; a product with the transposed rows loads them column-major.
// Scores leave their two result matrices through an f32 slot of the subgroup (16 x 32), where each
// row's LANES invocations (SUBGROUP / 16) take every LANES-th pair of its columns: masks,
// exponentials and row statistics (combined by subgroup shuffles) in f32, probabilities and score
// gradients back as f16 pairs into the subgroup's own 16 x 32 tile, the left operand of the output
// products. Gradients of the mean loss (dy, delta) are about 1/(B·T) in size, below f16's normal
// range, so they are scaled by the power of two at or above B·T as they are staged (exactly; the
// inverse is applied to the f32 results), as the coop-matrix matmuls do.
// Every output element is summed by one subgroup in a fixed order: no atomics, deterministic.
//   workgroup SUBGROUPS * SUBGROUP; dispatch (ceil(T / ROWS), B·n_head, 1).
// Workgroup memory: 9 KiB of staged rows (2 of 32 x 72 halves, or the owned 64 as they load), and
// per subgroup two f16 tiles (2 x 1.25 KiB) and two f32 slots (2 x 2.25 KiB), 256 bytes of
// statistics: 37.25 KiB.

enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
requires subgroup_id;

#include "lib/attention_io.wgsl"

override SUBGROUP: u32 = 32u;
const SUBGROUPS = 4u;
const ROWS = SUBGROUPS * 16u; // the owned rows
override INVOCATIONS = SUBGROUPS * SUBGROUP;
override LANES = SUBGROUP / 16u; // invocations of a subgroup per row of its 16
override PAIRS = 16u / LANES; // the column pairs of a 32-column row an invocation takes, LANES apart
const T16 = 16u; // the config's M, N and K
override HEAD: u32; // the widest head staged, 64: products hold 4 results of 16 columns (lever.ts sets it)
const OTHER = 32u; // the other side's rows met at a time
const PAD = 8u; // halves added to each staged row, so a matrix load's rows fall in different banks
override STRIDE = HEAD + PAD;
const PROW = OTHER + PAD; // a probability tile's row
override STAGED = OTHER * STRIDE; // halves of one staged operand of the other side
const PTILE = T16 * PROW; // halves of one subgroup's 16 x 32 tile
override ALL_TILES = 2u * STAGED + 2u * SUBGROUPS * PTILE;
const_assert ROWS == 2u * OTHER; // the owned rows load through both staged operands' room

alias Left = subgroup_matrix_left<f16, T16, T16>;
alias Right = subgroup_matrix_right<f16, T16, T16>;
alias Result = subgroup_matrix_result<f32, T16, T16>;

// The other side's two staged operands (OTH0, OTH1), which the owned rows pass through first; then
// each subgroup's two f16 tiles of 16 x 32 (probabilities or score gradients).
var<workgroup> tiles: array<f16, ALL_TILES>;
const OTH0 = 0u;
override OTH1 = STAGED;
// Each subgroup's two f32 slots of 16 rows x 32 columns (the scores' two results side by side, and
// the backward's dP), rows SROW long so that the invocations of a read fall in different banks.
const SROW = 36u;
const SLOT = T16 * SROW;
var<workgroup> scratch: array<f32, SUBGROUPS * 2u * SLOT>;
// The other side's lse and scaled delta, dK/dV's columns.
var<workgroup> stats: array<f32, 2u * OTHER>;

// The factor gradients are staged at: the power of two at or above the batch's rows.
fn grad_scale() -> f32 {
  return exp2(ceil(log2(f32(p.B * p.T))));
}

// Where this invocation's i-th 4 elements of a staged [rows][HEAD] block from row r0 lie: the
// global indices (fetch's guards: past T or D read 0) and the halves' offset in the tiles.
struct Quad {
  f: Fetch,
  at: u32,
}

fn quad(h: Head, t: u32, i: u32, r0: u32) -> Quad {
  let v = t + i * INVOCATIONS;
  let row = v / (HEAD / 4u);
  let col = (v % (HEAD / 4u)) * 4u;
  return Quad(fetch(h, vec4<u32>(r0 + row), vec4<u32>(col) + vec4<u32>(0u, 1u, 2u, 3u)), row * STRIDE + col);
}

// 4 elements as f16 into the tiles, each invocation writing whole words of its own (two
// invocations writing the halves of one word raced on the H200; see matmul_vec4.wgsl).
fn put(at: u32, x: vec4<f32>) {
  let y = vec4<f16>(x);
  tiles[at] = y.x; tiles[at + 1u] = y.y; tiles[at + 2u] = y.z; tiles[at + 3u] = y.w;
}

// One stager per buffer, as an entry point's bindings are the buffers its code names: `rows` rows
// from r0 at `to`.
fn stage_q(h: Head, t: u32, to: u32, r0: u32, rows: u32) {
  for (var i = 0u; i * INVOCATIONS < rows * HEAD / 4u; i++) { let s = quad(h, t, i, r0); put(to + s.at, q4(s.f)); }
}

fn stage_k(h: Head, t: u32, to: u32, r0: u32, rows: u32) {
  for (var i = 0u; i * INVOCATIONS < rows * HEAD / 4u; i++) { let s = quad(h, t, i, r0); put(to + s.at, k4(s.f)); }
}

fn stage_v(h: Head, t: u32, to: u32, r0: u32, rows: u32) {
  for (var i = 0u; i * INVOCATIONS < rows * HEAD / 4u; i++) { let s = quad(h, t, i, r0); put(to + s.at, v4(s.f)); }
}

fn stage_dy(h: Head, t: u32, to: u32, r0: u32, rows: u32, scale: f32) {
  for (var i = 0u; i * INVOCATIONS < rows * HEAD / 4u; i++) { let s = quad(h, t, i, r0); put(to + s.at, dy4(s.f) * scale); }
}

// Matrices are named and passed by value or pointer, never indexed or selected by a variable: a
// matrix picked at run time leaves the registers (an array of results ran at a third of the speed
// in the matmuls, 2026-12-02).

// A subgroup's owned rows, loaded once: its 16 staged rows (at OTH0) at head columns 0..63, between
// the barriers that make the staged rows readable and then free for the next staging.
struct Own {
  a0: Left,
  a1: Left,
  a2: Left,
  a3: Left,
}

fn own(sg: u32) -> Own {
  let at = OTH0 + sg * T16 * STRIDE;
  workgroupBarrier();
  let o = Own(subgroupMatrixLoad<Left, row_major>(&tiles, at, STRIDE), subgroupMatrixLoad<Left, row_major>(&tiles, at + 16u, STRIDE),
              subgroupMatrixLoad<Left, row_major>(&tiles, at + 32u, STRIDE), subgroupMatrixLoad<Left, row_major>(&tiles, at + 48u, STRIDE));
  workgroupBarrier();
  return o;
}

// s0, s1 += a (16 x 16 of the owned rows at head columns kk..) times the other side's 32 staged
// rows at `oth`, transposed: two 16-column halves.
fn step(a: Left, oth: u32, kk: u32, s0: ptr<function, Result>, s1: ptr<function, Result>) {
  *s0 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, col_major>(&tiles, oth + kk, STRIDE), *s0);
  *s1 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, col_major>(&tiles, oth + T16 * STRIDE + kk, STRIDE), *s1);
}

// The owned rows times the other side's 32 staged at `oth`, transposed, over the head's 16-column
// steps, spilled into the subgroup's slot `at` (a barrier makes them readable).
fn scores(o: Own, oth: u32, at: u32) {
  let D = head_dim();
  var s0 = Result(); var s1 = Result();
  step(o.a0, oth, 0u, &s0, &s1);
  if (D > 16u) { step(o.a1, oth, 16u, &s0, &s1); }
  if (D > 32u) { step(o.a2, oth, 32u, &s0, &s1); }
  if (D > 48u) { step(o.a3, oth, 48u, &s0, &s1); }
  spill(at, s0, s1);
}

// o0..o3 (head columns 0..63) += the subgroup's 16 x 32 tile `pt` times the other side's 32 rows at `oth`.
fn accumulate(pt: u32, oth: u32, o0: ptr<function, Result>, o1: ptr<function, Result>, o2: ptr<function, Result>, o3: ptr<function, Result>) {
  let D = head_dim();
  for (var kk = 0u; kk < OTHER; kk += T16) {
    let a = subgroupMatrixLoad<Left, row_major>(&tiles, pt + kk, PROW);
    let b = oth + kk * STRIDE;
    *o0 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tiles, b, STRIDE), *o0);
    if (D > 16u) { *o1 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tiles, b + 16u, STRIDE), *o1); }
    if (D > 32u) { *o2 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tiles, b + 32u, STRIDE), *o2); }
    if (D > 48u) { *o3 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tiles, b + 48u, STRIDE), *o3); }
  }
}

// This subgroup's f16 tile 0 or 1, and its f32 slot 0 or 1.
fn ptile(sg: u32, which: u32) -> u32 {
  return 2u * STAGED + (2u * sg + which) * PTILE;
}

fn slot(sg: u32, which: u32) -> u32 {
  return (2u * sg + which) * SLOT;
}

// Two results side by side into a slot (its columns 0..15 and 16..31); a barrier makes them readable.
fn spill(at: u32, a: Result, b: Result) {
  subgroupMatrixStore<row_major>(&scratch, at, a, SROW);
  subgroupMatrixStore<row_major>(&scratch, at + T16, b, SROW);
}

// Pair i of this invocation's row in the subgroup's 16 x 32 block: its first column.
fn pair(lane: u32, i: u32) -> u32 {
  return 2u * (lane % LANES + i * LANES);
}

fn spilled(at: u32, lane: u32, i: u32) -> vec2<f32> {
  let e = at + (lane / LANES) * SROW + pair(lane, i);
  return vec2<f32>(scratch[e], scratch[e + 1u]);
}

// Two values into a subgroup's f16 tile as one word of this invocation's.
fn put_pair(pt: u32, lane: u32, i: u32, x: vec2<f32>) {
  let e = pt + (lane / LANES) * PROW + pair(lane, i);
  let w = vec2<f16>(x);
  tiles[e] = w.x;
  tiles[e + 1u] = w.y;
}

// Whether the pair's two columns (the other side's c, c+1) exist and the causal mask leaves them
// for this invocation's row: columns at most the row for queries as rows, at least it for keys.
fn visible(c: u32, row: u32, queries_are_rows: bool) -> vec2<bool> {
  let col = vec2<u32>(c, c + 1u);
  return (col < vec2<u32>(p.T)) & select(col >= vec2<u32>(row), col <= vec2<u32>(row), queries_are_rows);
}

// The four output results into the subgroup's two slots (head columns 0..31, 32..63), between the
// barriers that make the slots free and then readable, for the entry point's writes: element e of
// its 16 x 64 block (below).
fn spill_out(sg: u32, o0: Result, o1: Result, o2: Result, o3: Result) {
  workgroupBarrier();
  spill(slot(sg, 0u), o0, o1);
  spill(slot(sg, 1u), o2, o3);
  workgroupBarrier();
}

struct Element {
  at: u32,
  ok: bool,
  x: f32,
}

fn element(h: Head, sg: u32, r0: u32, e: u32) -> Element {
  let row = e / HEAD;
  let col = e % HEAD;
  let x = scratch[slot(sg, col / 32u) + row * SROW + col % 32u];
  return Element(h.base + (r0 + row) * p.C + col, r0 + row < p.T && col < h.D, x);
}

// The max and the sum (at that max) of a row over its LANES invocations.
fn row_stats(m: f32, l: f32) -> vec2<f32> {
  var top = m;
  for (var o = 1u; o < LANES; o <<= 1u) { top = max(top, subgroupShuffleXor(top, o)); }
  var sum = l * exp(m - top);
  for (var o = 1u; o < LANES; o <<= 1u) { sum += subgroupShuffleXor(sum, o); }
  return vec2<f32>(top, sum);
}

@compute @workgroup_size(INVOCATIONS)
fn attention_forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32,
                     @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let h = head(wg);
  let q0 = wg.x * ROWS;
  let r0 = q0 + sg * T16; // this subgroup's first query
  let row = r0 + lane / LANES; // this invocation's
  let end = min(p.T, q0 + ROWS); // keys past the block's last query are masked for all its rows
  let s_at = slot(sg, 0u);
  stage_q(h, t, OTH0, q0, ROWS);
  let q = own(sg);
  // Pass 1: the row's max and sum, from this invocation's columns.
  var m = NEG_BIG;
  var l = 0.0;
  for (var c0 = 0u; c0 < end; c0 += OTHER) {
    // (the barrier after the last chunk's scores freed the staged rows, and this one's first frees the slot)
    stage_k(h, t, OTH0, c0, OTHER);
    workgroupBarrier();
    scores(q, OTH0, s_at);
    workgroupBarrier();
    var top = m;
    for (var i = 0u; i < PAIRS; i++) {
      let ok = visible(c0 + pair(lane, i), row, true);
      let x = select(vec2<f32>(NEG_BIG), spilled(s_at, lane, i) * h.scale, ok);
      top = max(top, max(x.x, x.y));
    }
    var sum = 0.0;
    for (var i = 0u; i < PAIRS; i++) {
      let ok = visible(c0 + pair(lane, i), row, true);
      let x = select(vec2<f32>(0.0), exp(spilled(s_at, lane, i) * h.scale - top), ok);
      sum += x.x + x.y;
    }
    l = l * exp(m - top) + sum;
    m = top;
  }
  let ml = row_stats(m, l);
  let row_lse = ml.x + log(ml.y);
  // Pass 2: exact probabilities, P·V summed on the matrix units.
  var o0 = Result(); var o1 = Result(); var o2 = Result(); var o3 = Result();
  let pt = ptile(sg, 0u);
  for (var c0 = 0u; c0 < end; c0 += OTHER) {
    workgroupBarrier(); // the last chunk's products are done with the staged rows
    stage_k(h, t, OTH0, c0, OTHER);
    stage_v(h, t, OTH1, c0, OTHER);
    workgroupBarrier();
    scores(q, OTH0, s_at);
    workgroupBarrier();
    for (var i = 0u; i < PAIRS; i++) {
      let ok = visible(c0 + pair(lane, i), row, true);
      put_pair(pt, lane, i, select(vec2<f32>(0.0), exp(spilled(s_at, lane, i) * h.scale - row_lse), ok));
    }
    workgroupBarrier();
    accumulate(pt, OTH1, &o0, &o1, &o2, &o3);
  }
  spill_out(sg, o0, o1, o2, o3);
  for (var e = lane; e < T16 * HEAD; e += SUBGROUP) {
    let x = element(h, sg, r0, e);
    if (x.ok) { y[x.at] = x.x; }
  }
  if (lane % LANES == 0u && row < p.T) { lse[h.bh * p.T + row] = row_lse; }
}

@compute @workgroup_size(INVOCATIONS)
fn attention_backward_dq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32,
                         @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let h = head(wg);
  let q0 = wg.x * ROWS;
  let r0 = q0 + sg * T16;
  let row = r0 + lane / LANES;
  let end = min(p.T, q0 + ROWS);
  let gs = grad_scale();
  let stat = h.bh * p.T + min(row, p.T - 1u);
  let row_lse = lse_in[stat];
  let row_delta = delta_in[stat] * gs;
  let s_at = slot(sg, 0u);
  let dp_at = slot(sg, 1u);
  let pt = ptile(sg, 0u);
  stage_q(h, t, OTH0, q0, ROWS);
  let q = own(sg);
  stage_dy(h, t, OTH0, q0, ROWS, gs);
  let dyr = own(sg);
  var o0 = Result(); var o1 = Result(); var o2 = Result(); var o3 = Result();
  for (var c0 = 0u; c0 < end; c0 += OTHER) {
    workgroupBarrier();
    stage_k(h, t, OTH0, c0, OTHER);
    stage_v(h, t, OTH1, c0, OTHER);
    workgroupBarrier();
    scores(q, OTH0, s_at);
    scores(dyr, OTH1, dp_at); // dP = dY·Vᵀ
    workgroupBarrier();
    for (var i = 0u; i < PAIRS; i++) {
      let ok = visible(c0 + pair(lane, i), row, true);
      let prob = exp(spilled(s_at, lane, i) * h.scale - row_lse);
      put_pair(pt, lane, i, select(vec2<f32>(0.0), prob * (spilled(dp_at, lane, i) - row_delta), ok));
    }
    workgroupBarrier();
    accumulate(pt, OTH0, &o0, &o1, &o2, &o3); // dS·K
  }
  spill_out(sg, o0, o1, o2, o3);
  for (var e = lane; e < T16 * HEAD; e += SUBGROUP) {
    let x = element(h, sg, r0, e);
    if (x.ok) { dq[x.at] = x.x * (h.scale / gs); }
  }
}

@compute @workgroup_size(INVOCATIONS)
fn attention_backward_dkdv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32,
                           @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let h = head(wg);
  let k0 = wg.x * ROWS; // here the owned rows are keys; the other side's are queries t >= s
  let r0 = k0 + sg * T16;
  let row = r0 + lane / LANES;
  let gs = grad_scale();
  let s_at = slot(sg, 0u);
  let dp_at = slot(sg, 1u);
  let pt = ptile(sg, 0u);
  let dst = ptile(sg, 1u);
  stage_k(h, t, OTH0, k0, ROWS);
  let kr = own(sg);
  stage_v(h, t, OTH0, k0, ROWS);
  let vr = own(sg);
  var k_0 = Result(); var k_1 = Result(); var k_2 = Result(); var k_3 = Result();
  var v_0 = Result(); var v_1 = Result(); var v_2 = Result(); var v_3 = Result();
  // From the block's first key on: the mask keeps t >= s on the chunks that hold its own queries.
  for (var c0 = k0; c0 < p.T; c0 += OTHER) {
    workgroupBarrier();
    stage_q(h, t, OTH0, c0, OTHER);
    stage_dy(h, t, OTH1, c0, OTHER, gs);
    if (t < OTHER) {
      let c = h.bh * p.T + min(c0 + t, p.T - 1u);
      stats[t] = lse_in[c];
      stats[OTHER + t] = delta_in[c] * gs;
    }
    workgroupBarrier();
    scores(kr, OTH0, s_at); // Sᵀ: keys by queries
    scores(vr, OTH1, dp_at); // dPᵀ = V·dYᵀ
    workgroupBarrier();
    for (var i = 0u; i < PAIRS; i++) {
      let c = pair(lane, i);
      let ok = visible(c0 + c, row, false);
      let prob = select(vec2<f32>(0.0), exp(spilled(s_at, lane, i) * h.scale - vec2<f32>(stats[c], stats[c + 1u])), ok);
      put_pair(pt, lane, i, prob);
      put_pair(dst, lane, i, prob * (spilled(dp_at, lane, i) - vec2<f32>(stats[OTHER + c], stats[OTHER + c + 1u])));
    }
    workgroupBarrier();
    accumulate(pt, OTH1, &v_0, &v_1, &v_2, &v_3); // Pᵀ·dY
    accumulate(dst, OTH0, &k_0, &k_1, &k_2, &k_3); // dSᵀ·Q
  }
  spill_out(sg, k_0, k_1, k_2, k_3);
  for (var e = lane; e < T16 * HEAD; e += SUBGROUP) {
    let x = element(h, sg, r0, e);
    if (x.ok) { dk[x.at] = x.x * (h.scale / gs); }
  }
  spill_out(sg, v_0, v_1, v_2, v_3);
  for (var e = lane; e < T16 * HEAD; e += SUBGROUP) {
    let x = element(h, sg, r0, e);
    if (x.ok) { dv[x.at] = x.x / gs; }
  }
}
