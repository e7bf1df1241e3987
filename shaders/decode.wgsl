// decode.wgsl: what changes when one token runs against the KV cache instead of a whole window:
// the kernels that depend on its position. The rest of a decode (LayerNorm, the projections,
// GELU, the residual adds, the head) is the training kernels on one row. The position and the
// token come from a buffer, not from Params, so one recorded sequence of dispatches serves every
// token.
//
// at: [pos, token] (u32): the new token and its position, which is also the number of tokens
// the cache holds before it.
//
// embedding_decode  y[c] = wte[token, c] + wpe[pos, c]
//   bindings 0 params, 8 wte [V,C] (read), 9 wpe [>=T,C] (read), 6 y [C] (read_write),
//            7 at (read). dispatch (ceil(C/128), 1, 1).
// attention_decode  writes the new token's key and value at row pos of the cache, then
//   y = softmax(q·kᵀ·scale)·v over cache rows 0..pos, for every head (attention.wgsl's maths
//   for the last row of a causal window, scale = 1/sqrt(D)).
//   bindings 0 params, 1 q [C], 2 k_new [C], 3 v_new [C] (read), 4 k [T,C], 5 v [T,C] (the
//            cache, read_write), 6 y [C] (read_write), 7 at (read). dispatch (n_head, 1, 1).
//
// Workgroup 256: invocation i scores key c0 + i of each chunk of 256 keys, 8 of its loads in
// flight at a time; then invocation (g, c) = (i / D, i % D) sums head column c over the chunk's
// keys g, g + G, ... (G = 256 / D groups, 4 loads in flight), and the groups' sums are added at
// the end. The softmax is online over the chunks (running max and sum, the sums of weighted values
// rescaled when the max grows), so any block_size works. A step is bound by the latency of
// dependent loads, not by bytes (a Huge head's cache is 64 KiB at most): hence the wide chunk and
// the independent loads, which took Huge's attention from 72 to 20 us a layer on an H200.
//
// Params: C, n_head (u32).

#include "lib/reduce.wgsl"

struct Params {
  C: u32,
  n_head: u32,
}

const CHUNK = 256u; // keys scored at once, one per invocation
const NEG_BIG = -3.0e38;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_new: array<f32>;
@group(0) @binding(3) var<storage, read> v_new: array<f32>;
@group(0) @binding(4) var<storage, read_write> k: array<f32>;
@group(0) @binding(5) var<storage, read_write> v: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<storage, read> at: array<u32, 2>;
@group(0) @binding(8) var<storage, read> wte: array<f32>;
@group(0) @binding(9) var<storage, read> wpe: array<f32>;

var<workgroup> q_scaled: array<f32, MAX_HEAD_DIM>;
var<workgroup> probs: array<f32, CHUNK>;
var<workgroup> groups: array<f32, CHUNK>; // group g's sum for column c at g * D + c
var<workgroup> pos_shared: u32;

@compute @workgroup_size(128)
fn embedding_decode(@builtin(global_invocation_id) id: vec3<u32>) {
  let c = id.x;
  if (c >= p.C) { return; }
  y[c] = wte[at[1] * p.C + c] + wpe[at[0] * p.C + c];
}

// q_scaled · k[row .. row + D): eight independent loads an iteration, summed in a fixed order.
fn score_of(row: u32, D: u32) -> f32 {
  var acc = vec4(0.0);
  var d = 0u;
  for (; d + 8u <= D; d += 8u) {
    let k0 = vec4(k[row + d], k[row + d + 1u], k[row + d + 2u], k[row + d + 3u]);
    let k1 = vec4(k[row + d + 4u], k[row + d + 5u], k[row + d + 6u], k[row + d + 7u]);
    let q0 = vec4(q_scaled[d], q_scaled[d + 1u], q_scaled[d + 2u], q_scaled[d + 3u]);
    let q1 = vec4(q_scaled[d + 4u], q_scaled[d + 5u], q_scaled[d + 6u], q_scaled[d + 7u]);
    acc += q0 * k0 + q1 * k1;
  }
  for (; d < D; d++) { acc.x += q_scaled[d] * k[row + d]; }
  return (acc.x + acc.y) + (acc.z + acc.w);
}

@compute @workgroup_size(256)
fn attention_decode(l: Lane, @builtin(workgroup_id) wg: vec3<u32>) {
  let D = p.C / p.n_head;
  let base = wg.x * D;
  let i = l.t;
  let G = CHUNK / D; // D <= MAX_HEAD_DIM, so at least 2 groups; invocations past G * D sum nothing
  let g = i / D;
  let col = base + i % D;
  if (i == 0u) { pos_shared = at[0]; }
  // The loop over chunks holds barriers: its bound must be uniform, as a workgroup-shared load is.
  let pos = workgroupUniformLoad(&pos_shared);
  if (i < D) {
    k[pos * p.C + base + i] = k_new[base + i];
    v[pos * p.C + base + i] = v_new[base + i];
    q_scaled[i] = q[base + i] / sqrt(f32(D));
  }
  // The new row is read by other invocations of this workgroup (it is this head's alone).
  storageBarrier();
  workgroupBarrier();
  var m = NEG_BIG;
  var sum = 0.0;
  var acc = 0.0;
  for (var c0 = 0u; c0 <= pos; c0 += CHUNK) {
    let s = c0 + i;
    var score = NEG_BIG;
    if (s <= pos) { score = score_of(s * p.C + base, D); }
    let m_new = max(m, reduce_max(l, score, CHUNK));
    let e = select(0.0, exp(score - m_new), s <= pos);
    probs[i] = e;
    // reduce_sum's barriers also publish probs to the whole workgroup.
    let rescale = exp(m - m_new);
    sum = sum * rescale + reduce_sum(l, e, CHUNK);
    if (g < G) {
      let n = min(CHUNK, pos + 1u - c0);
      var a = vec4(acc * rescale, 0.0, 0.0, 0.0);
      var j = g;
      for (; j + 3u * G < n; j += 4u * G) {
        let pv = vec4(probs[j], probs[j + G], probs[j + 2u * G], probs[j + 3u * G]);
        let vs = vec4(v[(c0 + j) * p.C + col], v[(c0 + j + G) * p.C + col], v[(c0 + j + 2u * G) * p.C + col], v[(c0 + j + 3u * G) * p.C + col]);
        a += pv * vs;
      }
      for (; j < n; j += G) { a.x += probs[j] * v[(c0 + j) * p.C + col]; }
      acc = (a.x + a.y) + (a.z + a.w);
    }
    m = m_new;
    workgroupBarrier(); // the next chunk overwrites probs
  }
  if (g < G) { groups[i] = acc; }
  workgroupBarrier();
  if (i < D) {
    var total = 0.0;
    for (var h = 0u; h < G; h++) { total += groups[h * D + i]; }
    y[base + i] = total / sum;
  }
}
