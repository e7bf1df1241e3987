// attention.wgsl: causal multi-head attention, flash-style: the scaled softmax is fused into one
// pass over the keys (online max and sum), the forward saves only the log-sum-exp of each row,
// and the backward recomputes the probabilities from it. q, k, v, y and their gradients are
// [B,T,C] with head h in columns h·D .. h·D+D-1 (D = C/n_head <= 128), i.e. straight out of the
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
// All: one invocation per (b, h, row t); workgroup 64; dispatch (ceil(T/64), B·n_head, 1).
// Each gradient element is summed by one invocation in a fixed order: no atomics, deterministic.
// The 64 rows of a workgroup walk the other side's rows (keys, or for dK/dV queries) together,
// a tile at a time through workgroup memory (2 x 8 KiB), so each K/V (Q/dY) row is read from
// global memory once per workgroup instead of once per invocation.
//
// Params: B, T, C, n_head (u32).

struct Params {
  B: u32,
  T: u32,
  C: u32,
  n_head: u32,
}

const MAX_D = 128u;
const NEG_BIG = -3.0e38;
const WG = 64u;
const TILE = 2048u; // floats per workgroup tile: 2048/D rows of D

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dy: array<f32>;
@group(0) @binding(7) var<storage, read_write> delta: array<f32>;
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;
@group(0) @binding(9) var<storage, read_write> dk: array<f32>;
@group(0) @binding(10) var<storage, read_write> dv: array<f32>;
@group(0) @binding(11) var<storage, read> y_in: array<f32>;
@group(0) @binding(12) var<storage, read> lse_in: array<f32>;
@group(0) @binding(13) var<storage, read> delta_in: array<f32>;

var<workgroup> tile_x: array<f32, TILE>; // k rows (forward, dq) or q rows (dkdv)
var<workgroup> tile_y: array<f32, TILE>; // v rows (forward, dq) or dy rows (dkdv)

struct Row {
  D: u32,
  scale: f32,
  bh: u32,     // b·n_head + h: index of the row's lse/delta block
  b: u32,
  col: u32,    // h·D
  t: u32,      // this invocation's row
}

fn row(wg: vec3<u32>, lid: u32) -> Row {
  let D = p.C / p.n_head;
  return Row(D, 1.0 / sqrt(f32(D)), wg.y, wg.y / p.n_head, (wg.y % p.n_head) * D, wg.x * WG + lid);
}

// Rows per tile. Computed from params alone, not from a Row (which holds the invocation's
// index), so the tile loops, and the barriers in them, are uniform to the compilers.
fn tile_rows() -> u32 {
  return min(TILE / (p.C / p.n_head), WG);
}

// Offset of element 0 of the head's slice at position t.
fn at(r: Row, t: u32) -> u32 {
  return (r.b * p.T + t) * p.C + r.col;
}

// Copy the head slices of rows start .. start+n-1 into the tiles, all 64 invocations; two
// functions so each entry point binds only the buffers it reads.
fn load_kv(r: Row, lid: u32, start: u32, n: u32) {
  for (var i = lid; i < n * r.D; i += WG) {
    let g = at(r, start + i / r.D) + i % r.D;
    tile_x[i] = k[g];
    tile_y[i] = v[g];
  }
}

fn load_qdy(r: Row, lid: u32, start: u32, n: u32) {
  for (var i = lid; i < n * r.D; i += WG) {
    let g = at(r, start + i / r.D) + i % r.D;
    tile_x[i] = q[g];
    tile_y[i] = dy[g];
  }
}

@compute @workgroup_size(64)
fn attention_forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row(wg, lid);
  let valid = r.t < p.T;
  let last = min(wg.x * WG + WG, p.T); // keys 0 .. last-1 serve the whole workgroup
  let rows = tile_rows();
  var qs: array<f32, MAX_D>;
  var acc: array<f32, MAX_D>;
  let qi = at(r, r.t);
  for (var d = 0u; d < r.D; d++) {
    qs[d] = select(0.0, q[qi + d], valid);
    acc[d] = 0.0;
  }
  var mx = NEG_BIG;
  var sum = 0.0;
  for (var s0 = 0u; s0 < last; s0 += rows) {
    let n = min(rows, last - s0);
    load_kv(r, lid, s0, n);
    workgroupBarrier();
    for (var j = 0u; j < n && s0 + j <= r.t; j++) {
      var score = 0.0;
      for (var d = 0u; d < r.D; d++) { score += qs[d] * tile_x[j * r.D + d]; }
      score *= r.scale;
      let new_mx = max(mx, score);
      let correction = exp(mx - new_mx);
      let w = exp(score - new_mx);
      sum = sum * correction + w;
      for (var d = 0u; d < r.D; d++) { acc[d] = acc[d] * correction + w * tile_y[j * r.D + d]; }
      mx = new_mx;
    }
    workgroupBarrier();
  }
  if (valid) {
    for (var d = 0u; d < r.D; d++) { y[qi + d] = acc[d] / sum; }
    lse[r.bh * p.T + r.t] = mx + log(sum);
  }
}

@compute @workgroup_size(64)
fn attention_backward_delta(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row(wg, lid);
  if (r.t >= p.T) { return; }
  let i = at(r, r.t);
  var s = 0.0;
  for (var d = 0u; d < r.D; d++) { s += dy[i + d] * y_in[i + d]; }
  delta[r.bh * p.T + r.t] = s;
}

@compute @workgroup_size(64)
fn attention_backward_dq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row(wg, lid);
  let valid = r.t < p.T;
  let last = min(wg.x * WG + WG, p.T);
  let rows = tile_rows();
  var qs: array<f32, MAX_D>;
  var dys: array<f32, MAX_D>;
  var acc: array<f32, MAX_D>;
  let i = at(r, r.t);
  for (var d = 0u; d < r.D; d++) {
    qs[d] = select(0.0, q[i + d], valid);
    dys[d] = select(0.0, dy[i + d], valid);
    acc[d] = 0.0;
  }
  let stat = min(r.bh * p.T + r.t, r.bh * p.T + p.T - 1u); // clamped for rows past T
  let row_lse = lse_in[stat];
  let row_delta = delta_in[stat];
  for (var s0 = 0u; s0 < last; s0 += rows) {
    let n = min(rows, last - s0);
    load_kv(r, lid, s0, n);
    workgroupBarrier();
    for (var j = 0u; j < n && s0 + j <= r.t; j++) {
      var score = 0.0;
      var dp = 0.0;
      for (var d = 0u; d < r.D; d++) {
        score += qs[d] * tile_x[j * r.D + d];
        dp += dys[d] * tile_y[j * r.D + d];
      }
      let ds = exp(score * r.scale - row_lse) * (dp - row_delta);
      for (var d = 0u; d < r.D; d++) { acc[d] += ds * tile_x[j * r.D + d]; }
    }
    workgroupBarrier();
  }
  if (valid) {
    for (var d = 0u; d < r.D; d++) { dq[i + d] = acc[d] * r.scale; }
  }
}

@compute @workgroup_size(64)
fn attention_backward_dkdv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row(wg, lid); // here r.t is a key row s; it meets query rows t >= s
  let valid = r.t < p.T;
  var ks: array<f32, MAX_D>;
  var vs: array<f32, MAX_D>;
  var dk_acc: array<f32, MAX_D>;
  var dv_acc: array<f32, MAX_D>;
  let j = at(r, r.t);
  for (var d = 0u; d < r.D; d++) {
    ks[d] = select(0.0, k[j + d], valid);
    vs[d] = select(0.0, v[j + d], valid);
    dk_acc[d] = 0.0;
    dv_acc[d] = 0.0;
  }
  let rows = tile_rows();
  for (var t0 = wg.x * WG; t0 < p.T; t0 += rows) {
    let n = min(rows, p.T - t0);
    load_qdy(r, lid, t0, n);
    workgroupBarrier();
    for (var i = 0u; i < n; i++) {
      let t = t0 + i;
      if (t < r.t) { continue; }
      var score = 0.0;
      var dp = 0.0;
      for (var d = 0u; d < r.D; d++) {
        score += tile_x[i * r.D + d] * ks[d];
        dp += tile_y[i * r.D + d] * vs[d];
      }
      let prob = exp(score * r.scale - lse_in[r.bh * p.T + t]);
      let ds = prob * (dp - delta_in[r.bh * p.T + t]);
      for (var d = 0u; d < r.D; d++) {
        dk_acc[d] += ds * tile_x[i * r.D + d];
        dv_acc[d] += prob * tile_y[i * r.D + d];
      }
    }
    workgroupBarrier();
  }
  if (valid) {
    for (var d = 0u; d < r.D; d++) {
      dk[j + d] = dk_acc[d] * r.scale;
      dv[j + d] = dv_acc[d];
    }
  }
}
