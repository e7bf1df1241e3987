// attention.wgsl: causal multi-head attention, flash-style: the scaled softmax is fused into one
// pass over the keys (online max and sum), the forward saves only the log-sum-exp of each row,
// and the backward recomputes the probabilities from it. q, k, v, y and their gradients are
// [B,T,C] with head h in columns h·D .. h·D+D-1 (D = C/n_head <= MAX_HEAD_DIM, facts.json's wgsl.consts), i.e. straight out of the
// q/k/v projections and straight into o_proj. scale = 1/sqrt(D).
//
// attention_forward  y = softmax(mask(q·kᵀ·scale))·v, lse[b,h,t] = log sum_s exp(score[t,s])
//   bindings 0 params, 1 q (read), 2 k (read), 3 v (read), 4 y [B,T,C] (read_write),
//            5 lse [B,n_head,T] (read_write).
// attention_backward_delta  delta[b,h,t] = sum_d dy·y over the head's columns
//   bindings 0 params, 6 dy [B,T,C] (read), 11 y (read), 7 delta [B,n_head,T] (read_write).
// attention_backward_dq  dq[t] = scale·sum_{s<=t} p[t,s]·(dy[t]·v[s] - delta[t])·k[s]
//   bindings 0 params, 1 q, 2 k, 3 v, 6 dy, 12 lse (read), 13 delta (read), 8 dq [B,T,C] (read_write).
// attention_backward_dkdv  dk[s] = scale·sum_{t>=s} p[t,s]·(dy[t]·v[s] - delta[t])·q[t],
//                          dv[s] = sum_{t>=s} p[t,s]·dy[t]
//   bindings 0 params, 1 q, 2 k, 3 v, 6 dy, 12 lse, 13 delta, 9 dk (read_write), 10 dv (read_write).
// All: workgroup 256; dispatch (ceil(T/64), B·n_head, 1). Workgroup (x, b·n_head + h) owns a
// block of 64 rows of head h: query rows (forward, delta, dq) or key rows (dkdv).
//
// FlashAttention-2's loop order, tiled like a matmul. The owned block meets the other side's
// rows 64 at a time, only the blocks the causal mask leaves (the mask is applied on the diagonal
// block alone). Invocation (ty, tx) = (lid/16, lid%16) holds rows 4ty..4ty+3 of the block as one
// vec4 per column, for two products:
// - scores: a 64x64 block of q·kᵀ (or k·qᵀ, v·dyᵀ, dy·vᵀ), 4 rows x columns tx+16j (j < 4) each,
//   both operands staged DK = 32 head columns at a time (a head narrower than that, or its last
//   step, stages zeros past its columns);
// - outputs: P·V (or dS·K, Pᵀ·dY, dSᵀ·Q), 4 rows x head columns tx+16c (c < 8) each, with the 64
//   columns of P staged 16 at a time beside the matching 16 rows of V.
// Row statistics stay with the invocation that owns the row, except the forward's row max and sum,
// which are combined over the 16 invocations of a row quad through workgroup memory.
// Every output element is summed by one invocation in a fixed order: no atomics, deterministic.
//
// Params: B, T, C, n_head (u32). Override HEAD: the widest head the pipeline takes (below).

#include "lib/attention_io.wgsl"

const SLOTS = MAX_HEAD_DIM / 16u; // head columns tx + 16c per invocation, c < SLOTS
const_assert SLOTS == 8u; // shifted_slots and accumulate are written out for 8
// The widest head this pipeline takes (the kernel table's _64 ops set 64): every use of the upper
// four slots is behind a test of it, so a compiler drops them and their registers. Huge's heads
// of 64 columns ran with registers for 128 before.
override HEAD: u32 = MAX_HEAD_DIM;
const BLOCK = 64u;
const DK = 32u; // head columns per score step

// All 16 KiB of workgroup memory, laid out anew by each phase; barriers separate the phases.
var<workgroup> sh: array<vec4<f32>, 1024>;
// Score step: the rows operand as [row quad][DK] (a vec4: 4 rows at one head column) and the
// columns operand as [tx][DK] (a vec4: rows tx, tx+16, tx+32, tx+48 of the other side), row tx
// rotated by tx so that the 16 tx of a read fall on distinct banks; two vec4s of each an invocation.
const AT_ROWS = 0u;
const AT_COLS = 512u;
// Per-row partials of the 16 invocations of a row quad: [row quad][tx].
const AT_RED = 0u;
// Output step: 16 columns of P or dS as [row quad][16], and the 16 matching rows of the other
// operand as [32-column group g][row pair e][tx], each vec4 holding (row 2e, row 2e+1) x (head
// columns 32g+tx, 32g+16+tx).
const AT_P = 256u;
const AT_X = 512u;

// Heads wider than 64 stage the output operand in two halves.
fn wide() -> bool {
  return HEAD > 64u && head_dim() > 64u;
}

// Score step, rows operand, element i (lid and lid + 256) staged at AT_ROWS + i: rows r0 + 4g ..
// r0 + 4g + 3 at head column d0 + dd (g = i/DK, dd = i%DK), so consecutive invocations read
// consecutive columns.
fn rows_at(h: Head, i: u32, r0: u32, d0: u32) -> Fetch {
  let t = vec4<u32>(r0 + (i / DK) * 4u) + vec4<u32>(0u, 1u, 2u, 3u);
  return fetch(h, t, vec4<u32>(d0 + i % DK));
}

// Score step, columns operand: rows c0 + g, +16, +32, +48 at the same head column.
fn cols_at(h: Head, i: u32, c0: u32, d0: u32) -> Fetch {
  let t = vec4<u32>(c0 + i / DK) + vec4<u32>(0u, 16u, 32u, 48u);
  return fetch(h, t, vec4<u32>(d0 + i % DK));
}

// Output step, rows x0 .. x0+15 of the other operand, staged at AT_X + 256·hi + lid: group
// g = lid/128 + 2·hi, row pair (lid/16)%8, so consecutive invocations read consecutive columns.
fn x_at(h: Head, lid: u32, x0: u32, hi: u32) -> Fetch {
  let r = x0 + 2u * ((lid / 16u) % 8u);
  let c = 32u * (lid / 128u + 2u * hi) + lid % 16u;
  return fetch(h, vec4<u32>(r, r, r + 1u, r + 1u), vec4<u32>(c, c + 16u, c, c + 16u));
}

// The forward's output operand: rows x0 .. x0+15 of v, the upper half only for wide heads.
fn v_x(h: Head, lid: u32, x0: u32) -> array<vec4<f32>, 2> {
  var x = array<vec4<f32>, 2>(v4(x_at(h, lid, x0, 0u)), vec4<f32>(0.0));
  if (wide()) { x[1] = v4(x_at(h, lid, x0, 1u)); }
  return x;
}

// The backward's four inputs by side and product: the query side's q (product 0, the scores S)
// and dy (product 1, dP = dy·vᵀ), the key side's k and v. dQ has the queries as rows, dK/dV the
// keys; uniform branches, so each invocation loads one buffer.
fn side4(queries: bool, product: u32, f: Fetch) -> vec4<f32> {
  if (queries) {
    if (product == 0u) { return q4(f); }
    return dy4(f);
  }
  if (product == 0u) { return k4(f); }
  return v4(f);
}

// An invocation's two elements of a score step's operand (elements lid and lid + 256).
alias Staged = array<vec4<f32>, 2>;

fn rows2(queries: bool, product: u32, h: Head, lid: u32, r0: u32, d0: u32) -> Staged {
  return Staged(side4(queries, product, rows_at(h, lid, r0, d0)), side4(queries, product, rows_at(h, lid + 256u, r0, d0)));
}

fn cols2(queries: bool, product: u32, h: Head, lid: u32, c0: u32, d0: u32) -> Staged {
  return Staged(side4(queries, product, cols_at(h, lid, c0, d0)), side4(queries, product, cols_at(h, lid + 256u, c0, d0)));
}

// The forward's, which reads q and k alone.
fn q2(h: Head, lid: u32, r0: u32, d0: u32) -> Staged {
  return Staged(q4(rows_at(h, lid, r0, d0)), q4(rows_at(h, lid + 256u, r0, d0)));
}

fn k2(h: Head, lid: u32, c0: u32, d0: u32) -> Staged {
  return Staged(k4(cols_at(h, lid, c0, d0)), k4(cols_at(h, lid + 256u, c0, d0)));
}

fn side_x(queries: bool, product: u32, h: Head, lid: u32, x0: u32) -> array<vec4<f32>, 2> {
  var x = array<vec4<f32>, 2>(side4(queries, product, x_at(h, lid, x0, 0u)), vec4<f32>(0.0));
  if (wide()) { x[1] = side4(queries, product, x_at(h, lid, x0, 1u)); }
  return x;
}

// A score step's two operands.
struct Operands {
  a: Staged,
  b: Staged,
}

// The first score step's operands of the backward's block pair (rows r0 .., columns c0 ..).
fn first_operands(h: Head, lid: u32, r0: u32, c0: u32, queries: bool) -> Operands {
  return Operands(rows2(queries, 0u, h, lid, r0, 0u), cols2(!queries, 0u, h, lid, c0, 0u));
}

// Every step below stages operands that were fetched from global memory one step earlier (the
// caller issues the next step's loads between staging and arithmetic, which end in barriers), so
// their latency hides behind the arithmetic. Locals declared in loops are zeroed explicitly: naga
// zeroes a declaration only once, not on each pass.

fn stage_scores(lid: u32, o: Operands) {
  sh[AT_ROWS + lid] = o.a[0];
  sh[AT_ROWS + lid + 256u] = o.a[1];
  sh[AT_COLS + cols_slot(lid)] = o.b[0];
  sh[AT_COLS + cols_slot(lid + 256u)] = o.b[1];
}

// Where element i = tx·DK + dd of the columns operand is staged (its row rotated by tx).
fn cols_slot(i: u32) -> u32 {
  let tx = i / DK;
  return tx * DK + (i + tx) % DK;
}

// s[j] += rows·column (tx + 16j) over the DK staged head columns. Private arrays are indexed by
// constants only, here and below, so they stay in registers.
fn scores(s: array<vec4<f32>, 4>, ty: u32, tx: u32) -> array<vec4<f32>, 4> {
  var r = s;
  for (var dd = 0u; dd < DK; dd++) {
    let a = sh[AT_ROWS + ty * DK + dd];
    let b = sh[AT_COLS + cols_slot(tx * DK + dd)];
    r[0] += a * b.x;
    r[1] += a * b.y;
    r[2] += a * b.z;
    r[3] += a * b.w;
  }
  return r;
}

fn stage_output(lid: u32, prob: vec4<f32>, x: array<vec4<f32>, 2>) {
  sh[AT_P + lid] = prob;
  sh[AT_X + lid] = x[0];
  if (wide()) { sh[AT_X + 256u + lid] = x[1]; }
}

// Score columns left by the causal mask for the 4 rows: all of them off the diagonal block; on
// it, column <= row (queries are rows) or column >= row (keys are rows, for dK/dV).
fn visible(diagonal: bool, queries_are_rows: bool, ty: u32, col: u32) -> vec4<bool> {
  let row = vec4<u32>(ty * 4u) + vec4<u32>(0u, 1u, 2u, 3u);
  let c = vec4<u32>(col);
  return vec4<bool>(!diagonal) | select(c >= row, c <= row, queries_are_rows);
}

// Column j of the scores, then the rest moved down: the output steps take s[0] each time.
fn shifted(s: array<vec4<f32>, 4>) -> array<vec4<f32>, 4> {
  return array<vec4<f32>, 4>(s[1], s[2], s[3], s[0]);
}

// The same for the output slots, so the final stores also index them by a constant. Those loops
// run HEAD / 16 times: unrolled, the slots past the head are never read.
fn shifted_slots(o: array<vec4<f32>, SLOTS>) -> array<vec4<f32>, SLOTS> {
  return array<vec4<f32>, SLOTS>(o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[0]);
}

// Group g of an output step: acc0/acc1 (head columns 32g+tx, 32g+16+tx) += P·X over 16 rows.
fn product(g: u32, ty: u32, tx: u32, acc0: vec4<f32>, acc1: vec4<f32>) -> array<vec4<f32>, 2> {
  var c0 = acc0;
  var c1 = acc1;
  for (var e = 0u; e < 8u; e++) {
    let pa = sh[AT_P + ty * 16u + 2u * e];
    let pb = sh[AT_P + ty * 16u + 2u * e + 1u];
    let x = sh[AT_X + (g * 8u + e) * 16u + tx];
    c0 += pa * x.x;
    c1 += pa * x.y;
    c0 += pb * x.z;
    c1 += pb * x.w;
  }
  return array<vec4<f32>, 2>(c0, c1);
}

// acc[c] (head column tx + 16c) += P·X over the staged 16 rows; groups past the head are skipped
// by a branch uniform over the dispatch.
fn accumulate(acc: array<vec4<f32>, SLOTS>, ty: u32, tx: u32) -> array<vec4<f32>, SLOTS> {
  let D = head_dim();
  var r = acc;
  var x = product(0u, ty, tx, r[0], r[1]);
  r[0] = x[0];
  r[1] = x[1];
  if (D > 32u) {
    x = product(1u, ty, tx, r[2], r[3]);
    r[2] = x[0];
    r[3] = x[1];
  }
  if (HEAD > 64u && D > 64u) {
    x = product(2u, ty, tx, r[4], r[5]);
    r[4] = x[0];
    r[5] = x[1];
  }
  if (HEAD > 96u && D > 96u) {
    x = product(3u, ty, tx, r[6], r[7]);
    r[6] = x[0];
    r[7] = x[1];
  }
  return r;
}

// The sum (or max) of v over the 16 invocations of each row quad, through workgroup memory in a
// fixed order: a row's statistics from its 16 invocations' shares.
fn across_row(lid: u32, v: vec4<f32>, take_max: bool) -> vec4<f32> {
  sh[AT_RED + lid] = v;
  workgroupBarrier();
  let quad = AT_RED + (lid / 16u) * 16u;
  var r = sh[quad];
  for (var i = 1u; i < 16u; i++) { r = select(r + sh[quad + i], max(r, sh[quad + i]), take_max); }
  return r;
}

// Where the 4 rows' values of head column tx + 16c go, and which exist.
fn out_at(h: Head, r0: u32, tx: u32, c: u32) -> Fetch {
  return fetch(h, vec4<u32>(r0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(tx + 16u * c));
}

// One of the backward's score products for a block pair, rows r0 .. r0+63 of the rows side (the
// queries for dQ, the keys for dK/dV) against rows c0 .. of the columns side: s of q and k for
// product 0, of dy and v for product 1, from `first`, the first step's operands. During the last
// step it fetches what comes next: product 1's first operands (`next`), or after product 1 the
// first output step's operand x, rows c0 .. of the columns side's input of product `x_product`.
struct Pass {
  s: array<vec4<f32>, 4>,
  next: Operands,
  x: array<vec4<f32>, 2>,
}

fn score_pass(h: Head, lid: u32, r0: u32, c0: u32, queries: bool, prod: u32, x_product: u32, first: Operands) -> Pass {
  let ty = lid / 16u;
  let tx = lid % 16u;
  var r = Pass(array<vec4<f32>, 4>(), first, array<vec4<f32>, 2>());
  for (var d0 = 0u; d0 < head_dim(); d0 += DK) {
    stage_scores(lid, r.next);
    workgroupBarrier();
    if (d0 + DK < head_dim()) {
      r.next = Operands(rows2(queries, prod, h, lid, r0, d0 + DK), cols2(!queries, prod, h, lid, c0, d0 + DK));
    } else if (prod == 0u) {
      r.next = Operands(rows2(queries, 1u, h, lid, r0, 0u), cols2(!queries, 1u, h, lid, c0, 0u));
    } else {
      r.x = side_x(!queries, x_product, h, lid, c0);
    }
    r.s = scores(r.s, ty, tx);
    workgroupBarrier();
  }
  return r;
}

// Both products: s (scores) and dp, and the first output step's operand x.
struct Products {
  s: array<vec4<f32>, 4>,
  dp: array<vec4<f32>, 4>,
  x: array<vec4<f32>, 2>,
}

fn products(h: Head, lid: u32, r0: u32, c0: u32, queries: bool, x_product: u32, first: Operands) -> Products {
  let s = score_pass(h, lid, r0, c0, queries, 0u, x_product, first);
  let dp = score_pass(h, lid, r0, c0, queries, 1u, x_product, s.next);
  return Products(s.s, dp.s, dp.x);
}

@compute @workgroup_size(256)
fn attention_forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = head(wg);
  let ty = lid / 16u;
  let tx = lid % 16u;
  let q0 = wg.x * BLOCK;
  var o: array<vec4<f32>, SLOTS>;
  var m = vec4<f32>(NEG_BIG);
  var l = vec4<f32>(0.0); // this invocation's share of the row sums, at max m
  var next = Operands(q2(h, lid, q0, 0u), k2(h, lid, 0u, 0u));
  var x: array<vec4<f32>, 2>;
  for (var k0 = 0u; k0 <= q0; k0 += BLOCK) {
    var s = array<vec4<f32>, 4>();
    for (var d0 = 0u; d0 < head_dim(); d0 += DK) {
      stage_scores(lid, next);
      workgroupBarrier();
      if (d0 + DK < head_dim()) {
        next = Operands(q2(h, lid, q0, d0 + DK), k2(h, lid, k0, d0 + DK));
      } else {
        x = v_x(h, lid, k0);
      }
      s = scores(s, ty, tx);
      workgroupBarrier();
    }
    let diagonal = k0 == q0;
    s[0] = select(vec4<f32>(NEG_BIG), s[0] * h.scale, visible(diagonal, true, ty, tx));
    s[1] = select(vec4<f32>(NEG_BIG), s[1] * h.scale, visible(diagonal, true, ty, tx + 16u));
    s[2] = select(vec4<f32>(NEG_BIG), s[2] * h.scale, visible(diagonal, true, ty, tx + 32u));
    s[3] = select(vec4<f32>(NEG_BIG), s[3] * h.scale, visible(diagonal, true, ty, tx + 48u));
    let m_new = max(m, across_row(lid, max(max(s[0], s[1]), max(s[2], s[3])), true));
    let correction = exp(m - m_new);
    m = m_new;
    s[0] = exp(s[0] - m);
    s[1] = exp(s[1] - m);
    s[2] = exp(s[2] - m);
    s[3] = exp(s[3] - m);
    l = l * correction + ((s[0] + s[1]) + (s[2] + s[3]));
    o = array<vec4<f32>, SLOTS>(o[0] * correction, o[1] * correction, o[2] * correction, o[3] * correction,
                                o[4] * correction, o[5] * correction, o[6] * correction, o[7] * correction);
    for (var j = 0u; j < 4u; j++) {
      stage_output(lid, s[0], x);
      s = shifted(s);
      workgroupBarrier();
      if (j < 3u) {
        x = v_x(h, lid, k0 + 16u * (j + 1u));
      } else {
        next = Operands(q2(h, lid, q0, 0u), k2(h, lid, k0 + BLOCK, 0u));
      }
      o = accumulate(o, ty, tx);
      workgroupBarrier();
    }
  }
  let sum = across_row(lid, l, false);
  let r0 = q0 + ty * 4u;
  for (var c = 0u; c < HEAD / 16u; c++) {
    let f = out_at(h, r0, tx, c);
    for (var i = 0u; i < 4u; i++) { if (f.ok[i]) { y[f.at[i]] = o[0][i] / sum[i]; } }
    o = shifted_slots(o);
  }
  if (tx == 0u) {
    let f = stats_at(h, r0, 1u);
    let row_lse = m + log(sum);
    for (var i = 0u; i < 4u; i++) { if (f.ok[i]) { lse[f.at[i]] = row_lse[i]; } }
  }
}

@compute @workgroup_size(256)
fn attention_backward_delta(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = head(wg);
  let ty = lid / 16u;
  let tx = lid % 16u;
  let r0 = wg.x * BLOCK + ty * 4u;
  var part = vec4<f32>(0.0);
  for (var c = 0u; c * 16u < h.D; c++) {
    let f = out_at(h, r0, tx, c);
    part += dy4(f) * y4(f);
  }
  let sum = across_row(lid, part, false);
  let f = stats_at(h, r0, 1u);
  if (tx == 0u) {
    for (var i = 0u; i < 4u; i++) { if (f.ok[i]) { delta[f.at[i]] = sum[i]; } }
  }
}

@compute @workgroup_size(256)
fn attention_backward_dq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = head(wg);
  let ty = lid / 16u;
  let tx = lid % 16u;
  let q0 = wg.x * BLOCK;
  let stat = stats_at(h, q0 + ty * 4u, 1u).at; // rows past T: any value
  let row_lse = vec4<f32>(lse_in[stat.x], lse_in[stat.y], lse_in[stat.z], lse_in[stat.w]);
  let row_delta = vec4<f32>(delta_in[stat.x], delta_in[stat.y], delta_in[stat.z], delta_in[stat.w]);
  var acc: array<vec4<f32>, SLOTS>;
  var first = first_operands(h, lid, q0, 0u, true);
  for (var k0 = 0u; k0 <= q0; k0 += BLOCK) {
    var pr = products(h, lid, q0, k0, true, 0u, first); // dS·K: x holds rows of k
    let diagonal = k0 == q0;
    for (var j = 0u; j < 4u; j++) {
      let prob = exp(pr.s[0] * h.scale - row_lse);
      let ds = select(vec4<f32>(0.0), prob * (pr.dp[0] - row_delta), visible(diagonal, true, ty, tx + 16u * j));
      pr.s = shifted(pr.s);
      pr.dp = shifted(pr.dp);
      stage_output(lid, ds, pr.x);
      workgroupBarrier();
      if (j < 3u) {
        pr.x = side_x(false, 0u, h, lid, k0 + 16u * (j + 1u));
      } else {
        first = first_operands(h, lid, q0, k0 + BLOCK, true);
      }
      acc = accumulate(acc, ty, tx);
      workgroupBarrier();
    }
  }
  for (var c = 0u; c < HEAD / 16u; c++) {
    let f = out_at(h, q0 + ty * 4u, tx, c);
    for (var i = 0u; i < 4u; i++) { if (f.ok[i]) { dq[f.at[i]] = acc[0][i] * h.scale; } }
    acc = shifted_slots(acc);
  }
}

@compute @workgroup_size(256)
fn attention_backward_dkdv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = head(wg);
  let ty = lid / 16u;
  let tx = lid % 16u;
  let k0 = wg.x * BLOCK; // here the rows are keys; the columns are queries t >= s
  var dk_acc: array<vec4<f32>, SLOTS>;
  var dv_acc: array<vec4<f32>, SLOTS>;
  var first = first_operands(h, lid, k0, k0, false);
  for (var q0 = k0; q0 < p.T; q0 += BLOCK) {
    // This invocation's queries, one per score column, and their saved statistics.
    let stat = stats_at(h, q0 + tx, 16u);
    var col_lse = vec4<f32>(lse_in[stat.at.x], lse_in[stat.at.y], lse_in[stat.at.z], lse_in[stat.at.w]);
    var col_delta = vec4<f32>(delta_in[stat.at.x], delta_in[stat.at.y], delta_in[stat.at.z], delta_in[stat.at.w]);
    var col_ok = stat.ok;
    var pr = products(h, lid, k0, q0, false, 1u, first); // Pᵀ·dY first: x holds rows of dy
    let diagonal = q0 == k0;
    for (var j = 0u; j < 4u; j++) {
      let keep = visible(diagonal, false, ty, tx + 16u * j) & vec4<bool>(col_ok.x);
      let prob = select(vec4<f32>(0.0), exp(pr.s[0] * h.scale - col_lse.x), keep);
      let ds = prob * (pr.dp[0] - col_delta.x);
      pr.s = shifted(pr.s);
      pr.dp = shifted(pr.dp);
      col_lse = col_lse.yzwx;
      col_delta = col_delta.yzwx;
      col_ok = col_ok.yzwx;
      stage_output(lid, prob, pr.x);
      workgroupBarrier();
      pr.x = side_x(true, 0u, h, lid, q0 + 16u * j);
      dv_acc = accumulate(dv_acc, ty, tx);
      workgroupBarrier();
      stage_output(lid, ds, pr.x);
      workgroupBarrier();
      if (j < 3u) {
        pr.x = side_x(true, 1u, h, lid, q0 + 16u * (j + 1u));
      } else {
        first = first_operands(h, lid, k0, q0 + BLOCK, false);
      }
      dk_acc = accumulate(dk_acc, ty, tx);
      workgroupBarrier();
    }
  }
  for (var c = 0u; c < HEAD / 16u; c++) {
    let f = out_at(h, k0 + ty * 4u, tx, c);
    for (var i = 0u; i < 4u; i++) {
      if (f.ok[i]) {
        dk[f.at[i]] = dk_acc[0][i] * h.scale;
        dv[f.at[i]] = dv_acc[0][i];
      }
    }
    dk_acc = shifted_slots(dk_acc);
    dv_acc = shifted_slots(dv_acc);
  }
}
