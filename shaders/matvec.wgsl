// matvec.wgsl: matmul_vec4.wgsl's nn and nt products when A has one row (M = 1: a decoding
// step's projections and head). The tiled kernels give one row a whole tile, and their K loop, a
// chain of barriers, is then the whole cost (on the H200 a decode ran no faster than a full
// window); here K is cut across the workgroup instead, each invocation summing its own slice
// with no barrier until the slices are added.
//
// matvec_nn  c[n] = sum_k a[k]·b[k,n]  (b [K,N])
// matvec_nt  c[n] = sum_k a[k]·b[n,k]  (b [N,K])
//   + bias[n] with BIAS, + c[n] with ACCUMULATE (Params.flags). Bindings as matmul.wgsl's:
//   0 params, 1 a [K] (read), 2 b (read), 3 bias [N] (read; without BIAS any buffer of at least
//   16 bytes but c), 4 c [N] (read_write); all as vec4s, so N % 4 == 0 and K % 4 == 0.
//   Workgroup 256, dispatch (ceil(N / OUTS), P, 1): each workgroup owns OUTS outputs of product y
//   of P (nn; nt: P = 1) that share a, whose weights, biases and outputs lie b_stride, bias_stride
//   and c_stride vec4s apart in their bindings (a decoding step's q, k and v in one dispatch).
// matvec_nn_ln, matvec_nt_ln  the same of LayerNorm(a) (weight ln_w, bias ln_b: bindings 6, 7,
//   [K]; eps from Params; K <= the override MAX_K): each workgroup finds the row's mean and
//   deviation itself and keeps the normalised row in workgroup memory, which for one row is
//   cheaper than a dispatch of its own (layernorm.wgsl's forward, statistics unsaved).
// matvec_nn_ln_gelu  matvec_nn_ln then GELU of each output (after the bias; lib/gelu.wgsl): a
//   decoding step's fc_in without gelu_forward's dispatch (ACCUMULATE is not taken).
// OUTS, the outputs per workgroup, is an override the kernel table sets (kernels.ts, which sizes
// the dispatch from the same entry): a power of 2 from 4 to 256. At its 32:
// nn: invocation (s, j) = (t/8, t%8) sums rows k = s, s+32, ... of the vec4 of columns j, so 8
//   neighbours read 128 contiguous bytes of a row of b.
// nt: invocation (r, s) = (t/8, t%8) sums the vec4s s, s+8, ... along K of row r, 8 neighbours
//   again reading 128 contiguous bytes.
// The slices' partial sums are added in a fixed order through workgroup memory: deterministic.
//
// Params: M (1), N, K, flags (u32), eps (f32), b_stride, bias_stride, c_stride (u32).

#include "lib/gelu.wgsl"
#include "lib/reduce.wgsl"

struct Params {
  M: u32,
  N: u32,
  K: u32,
  flags: u32,
  eps: f32,
  b_stride: u32,
  bias_stride: u32,
  c_stride: u32,
}

override OUTS: u32; // outputs per workgroup (kernels.ts sets it)
override COLUMNS = OUTS / 4u; // nn: vec4 columns per workgroup
override SLICES = 256u / COLUMNS; // nn: slices of K per vec4 column
override LANES = 256u / OUTS; // nt: slices of K per output

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> c: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> ln_w: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> ln_b: array<vec4<f32>>;

var<workgroup> part4: array<vec4<f32>, 256>;
var<workgroup> part: array<f32, 256>;
override MAX_K: u32; // the widest row the _ln entry points normalise (kernels.ts sets it)
var<workgroup> row: array<vec4<f32>, MAX_K / 4u>; // their normalised a

// The vec4 of outputs `n4` of product y from its sum: the bias and the old value added as the
// flags say, GELU taken after the bias where `activate`.
fn emit(y: u32, n4: u32, sum: vec4<f32>, activate: bool) {
  var out = sum;
  if ((p.flags & BIAS) != 0u) { out += bias[y * p.bias_stride + n4]; }
  if (activate) { out = vec4<f32>(gelu(out.x), gelu(out.y), gelu(out.z), gelu(out.w)); }
  let i = y * p.c_stride + n4;
  if ((p.flags & ACCUMULATE) != 0u) { out += c[i]; }
  c[i] = out;
}

// LayerNorm(a) into `row`, by every invocation (two passes for the statistics, as layernorm.wgsl).
fn normalise(l: Lane) {
  let K4 = p.K / 4u;
  var s = 0.0;
  for (var q = l.t; q < K4; q += 256u) { let v = a[q]; s += (v.x + v.y) + (v.z + v.w); }
  let mean = reduce_sum(l, s, 256u) / f32(p.K);
  var ss = 0.0;
  for (var q = l.t; q < K4; q += 256u) { let d = a[q] - mean; ss += dot(d, d); }
  let rstd = 1.0 / sqrt(reduce_sum(l, ss, 256u) / f32(p.K) + p.eps);
  for (var q = l.t; q < K4; q += 256u) { row[q] = (a[q] - mean) * rstd * ln_w[q] + ln_b[q]; }
  workgroupBarrier();
}

// a's vec4 q, or the normalised row's.
fn a4(q: u32, normalised: bool) -> vec4<f32> {
  if (normalised) { return row[q]; }
  return a[q];
}

fn nn(wg: vec3<u32>, t: u32, normalised: bool, activate: bool) {
  let N4 = p.N / 4u;
  let j = t % COLUMNS;
  let s = t / COLUMNS;
  let n4 = wg.x * COLUMNS + j;
  let w = wg.y * p.b_stride;
  var acc = vec4<f32>(0.0);
  if (n4 < N4) {
    for (var k = s; k < p.K; k += SLICES) { acc += a4(k / 4u, normalised)[k % 4u] * b[w + k * N4 + n4]; }
  }
  part4[t] = acc;
  workgroupBarrier();
  if (s == 0u && n4 < N4) {
    var sum = vec4<f32>(0.0);
    for (var i = 0u; i < SLICES; i++) { sum += part4[i * COLUMNS + j]; }
    emit(wg.y, n4, sum, activate);
  }
}

fn nt(wg: vec3<u32>, t: u32, normalised: bool) {
  let K4 = p.K / 4u;
  let s = t % LANES;
  let n = wg.x * OUTS + t / LANES;
  var acc = vec4<f32>(0.0);
  if (n < p.N) {
    for (var q = s; q < K4; q += LANES) { acc += a4(q, normalised) * b[n * K4 + q]; }
  }
  part[t] = (acc.x + acc.y) + (acc.z + acc.w);
  workgroupBarrier();
  // Invocation t < OUTS / 4 finishes outputs 4t .. 4t+3 of the workgroup's OUTS: one vec4 store.
  let n4 = wg.x * (OUTS / 4u) + t;
  if (t < OUTS / 4u && n4 < p.N / 4u) {
    var sum = vec4<f32>(0.0);
    for (var i = 0u; i < LANES; i++) {
      sum += vec4<f32>(part[(4u * t) * LANES + i], part[(4u * t + 1u) * LANES + i], part[(4u * t + 2u) * LANES + i], part[(4u * t + 3u) * LANES + i]);
    }
    emit(0u, n4, sum, false);
  }
}

@compute @workgroup_size(256)
fn matvec_nn(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  nn(wg, l.t, false, false);
}

@compute @workgroup_size(256)
fn matvec_nn_ln(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  normalise(l);
  nn(wg, l.t, true, false);
}

@compute @workgroup_size(256)
fn matvec_nn_ln_gelu(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  normalise(l);
  nn(wg, l.t, true, true);
}

@compute @workgroup_size(256)
fn matvec_nt(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  nt(wg, l.t, false);
}

@compute @workgroup_size(256)
fn matvec_nt_ln(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  normalise(l);
  nt(wg, l.t, true);
}
