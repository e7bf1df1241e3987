// The first production kernel, kept as a baseline: 128x128 block, 8x8 per invocation in 16
// vec4 registers, scalar bounds-checked loads, one workgroup buffer (two barriers a k-step,
// global loads not overlapped with arithmetic). Any M, N, K.
// Entry points, bindings, params and dispatch as shaders/matmul.wgsl.

struct Params {
  M: u32,
  N: u32,
  K: u32,
  flags: u32,
}

const BIAS = 1u;
const ACCUMULATE = 2u;
const BM = 128u;
const BN = 128u;
const BK = 8u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;

var<workgroup> tile_a: array<vec4<f32>, 256>; // [BK][BM/4], k-major
var<workgroup> tile_b: array<vec4<f32>, 256>; // [BK][BN/4], k-major

// Element (row, k) of op(X) for X with `rows` rows of op(X) and `depth` = K; stored [rows, K]
// or, when transposed, [K, rows].
fn a_at(m: u32, k: u32, transposed: bool) -> f32 {
  if (m >= p.M || k >= p.K) { return 0.0; }
  if (transposed) { return a[k * p.M + m]; }
  return a[m * p.K + k];
}

fn b_at(k: u32, n: u32, transposed: bool) -> f32 {
  if (n >= p.N || k >= p.K) { return 0.0; }
  if (transposed) { return b[n * p.K + k]; }
  return b[k * p.N + n];
}

// Fill tile_a / tile_b for k0.. k0+BK. Each of the 256 invocations loads 4 values, walking
// along whichever dimension is contiguous in memory so neighbouring invocations read
// neighbouring addresses.
fn load_tiles(t: u32, m0: u32, n0: u32, k0: u32, a_trans: bool, b_trans: bool) {
  if (a_trans) {
    let kk = t / 32u;
    let mm = (t % 32u) * 4u;
    tile_a[kk * 32u + mm / 4u] = vec4<f32>(a_at(m0 + mm, k0 + kk, true), a_at(m0 + mm + 1u, k0 + kk, true),
                                           a_at(m0 + mm + 2u, k0 + kk, true), a_at(m0 + mm + 3u, k0 + kk, true));
  } else {
    let mm = t / 2u;
    let kk = (t % 2u) * 4u;
    for (var j = 0u; j < 4u; j++) {
      tile_a[(kk + j) * 32u + mm / 4u][mm % 4u] = a_at(m0 + mm, k0 + kk + j, false);
    }
  }
  if (b_trans) {
    let nn = t / 2u;
    let kk = (t % 2u) * 4u;
    for (var j = 0u; j < 4u; j++) {
      tile_b[(kk + j) * 32u + nn / 4u][nn % 4u] = b_at(k0 + kk + j, n0 + nn, true);
    }
  } else {
    let kk = t / 32u;
    let nn = (t % 32u) * 4u;
    tile_b[kk * 32u + nn / 4u] = vec4<f32>(b_at(k0 + kk, n0 + nn, false), b_at(k0 + kk, n0 + nn + 1u, false),
                                           b_at(k0 + kk, n0 + nn + 2u, false), b_at(k0 + kk, n0 + nn + 3u, false));
  }
}

fn store4(m: u32, n: u32, v: vec4<f32>) {
  if (m >= p.M) { return; }
  for (var j = 0u; j < 4u; j++) {
    let col = n + j;
    if (col < p.N) {
      var out = v[j];
      if ((p.flags & BIAS) != 0u) { out += bias[col]; }
      let i = m * p.N + col;
      if ((p.flags & ACCUMULATE) != 0u) { out += c[i]; }
      c[i] = out;
    }
  }
}

fn matmul(wg: vec3<u32>, t: u32, a_trans: bool, b_trans: bool) {
  let m0 = wg.y * BM;
  let n0 = wg.x * BN;
  let tx = t % 16u; // columns tx*4.. and 64 + tx*4..
  let ty = t / 16u; // rows ty*4.. and 64 + ty*4..
  var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0);
  var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
  var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0);
  var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
  var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0);
  var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
  var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0);
  var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    load_tiles(t, m0, n0, k0, a_trans, b_trans);
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      let a0 = tile_a[kk * 32u + ty];
      let a1 = tile_a[kk * 32u + 16u + ty];
      let b0 = tile_b[kk * 32u + tx];
      let b1 = tile_b[kk * 32u + 16u + tx];
      c00 += a0.x * b0; c01 += a0.x * b1;
      c10 += a0.y * b0; c11 += a0.y * b1;
      c20 += a0.z * b0; c21 += a0.z * b1;
      c30 += a0.w * b0; c31 += a0.w * b1;
      c40 += a1.x * b0; c41 += a1.x * b1;
      c50 += a1.y * b0; c51 += a1.y * b1;
      c60 += a1.z * b0; c61 += a1.z * b1;
      c70 += a1.w * b0; c71 += a1.w * b1;
    }
    workgroupBarrier();
  }
  let r0 = m0 + ty * 4u;
  let r1 = m0 + 64u + ty * 4u;
  let q0 = n0 + tx * 4u;
  let q1 = n0 + 64u + tx * 4u;
  store4(r0, q0, c00); store4(r0, q1, c01);
  store4(r0 + 1u, q0, c10); store4(r0 + 1u, q1, c11);
  store4(r0 + 2u, q0, c20); store4(r0 + 2u, q1, c21);
  store4(r0 + 3u, q0, c30); store4(r0 + 3u, q1, c31);
  store4(r1, q0, c40); store4(r1, q1, c41);
  store4(r1 + 1u, q0, c50); store4(r1 + 1u, q1, c51);
  store4(r1 + 2u, q0, c60); store4(r1 + 2u, q1, c61);
  store4(r1 + 3u, q0, c70); store4(r1 + 3u, q1, c71);
}

@compute @workgroup_size(256)
fn matmul_nn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul(wg, t, false, false);
}

@compute @workgroup_size(256)
fn matmul_nt(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul(wg, t, false, true);
}

@compute @workgroup_size(256)
fn matmul_tn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul(wg, t, true, false);
}
