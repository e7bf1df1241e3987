// matmul.wgsl: C = op(A)·op(B) (+ bias) (+ C) in f32 for any M, N, K (no multiple-of-tile or
// multiple-of-4 requirement), plus the column sum a bias gradient needs. matmul_vec4.wgsl is
// the faster path for shapes whose contiguous dimensions are multiples of 4.
//
// matmul_nn  C[M,N] = A[M,K]·B[K,N]     linear forward y = x·W (+ b)
// matmul_nt  C[M,N] = A[M,K]·B[N,K]ᵀ    input gradient dx = dy·Wᵀ, tied head logits = x·wteᵀ
// matmul_tn  C[M,N] = A[K,M]ᵀ·B[K,N]    weight gradient dW = xᵀ·dy
//   group 0 binding 0: params (uniform Params)
//           binding 1: a    (storage, read)        row-major as above
//           binding 2: b    (storage, read)        row-major as above
//           binding 3: bias (storage, read)        [N]; read only when flags has BIAS, else bind any
//                                                  buffer but c (a writable binding must not alias)
//           binding 4: c    (storage, read_write)  [M,N]; read first when flags has ACCUMULATE
//   workgroup 256; dispatch (ceil(N/128), ceil(M/128), 1).
// matmul_colsum  c[n] = sum_m a[m,n] (+ c[n] with ACCUMULATE): the bias gradient, rows summed in a
//   fixed order (deterministic). Bindings 0 params (M rows, N cols), 1 a [M,N], 4 c [N].
//   workgroup 256; dispatch (ceil(N/64), S, 1). With S > 1 the rows are cut into S runs and
//   workgroup row y writes its run's sums to c[y·N ..] (S·N floats, flags 0), for a second
//   matmul_colsum over those S rows: ceil(N/64) workgroups alone cannot fill a GPU.
//
// Params: four u32: M, N, K, flags (bit 0 BIAS: add bias[n]; bit 1 ACCUMULATE: C += result).
//
// Each workgroup computes a 128x128 block of C, each invocation an 8x8 sub-block held in 16 vec4
// registers. A and B pass through workgroup memory 8 k-steps at a time, stored k-major so the
// inner loop reads both as vec4, in two buffers (16 KiB, the WebGPU default limit): the loads
// of the next step are issued before the arithmetic of this one, and one barrier a step
// suffices. Out-of-range elements load as 0 and are not stored. Measured variants and their
// numbers: bench/bench_matmul.py, bench/matmul/, content/docs/kernels.md.

struct Params {
  M: u32,
  N: u32,
  K: u32,
  flags: u32,
}

const BM = 128u;
const BN = 128u;
const BK = 8u;
const TILE = 256u; // vec4s per buffer: BK rows of 32

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;

var<workgroup> tile_a: array<vec4<f32>, 512>; // 2 buffers x [BK][BM/4], k-major
var<workgroup> tile_b: array<vec4<f32>, 512>; // 2 buffers x [BK][BN/4], k-major
var<workgroup> partial: array<f32, 256>;

// The 4 values of A and of B one invocation carries from global to workgroup memory per step,
// taken along whichever dimension is contiguous in memory.
struct Fetched {
  a: vec4<f32>,
  b: vec4<f32>,
}

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

fn fetch(t: u32, m0: u32, n0: u32, k0: u32, a_trans: bool, b_trans: bool) -> Fetched {
  var f: Fetched;
  if (a_trans) {
    let k = k0 + t / 32u;
    let m = m0 + (t % 32u) * 4u;
    f.a = vec4<f32>(a_at(m, k, true), a_at(m + 1u, k, true), a_at(m + 2u, k, true), a_at(m + 3u, k, true));
  } else {
    let m = m0 + t / 2u;
    let k = k0 + (t % 2u) * 4u;
    f.a = vec4<f32>(a_at(m, k, false), a_at(m, k + 1u, false), a_at(m, k + 2u, false), a_at(m, k + 3u, false));
  }
  if (b_trans) {
    let n = n0 + t / 2u;
    let k = k0 + (t % 2u) * 4u;
    f.b = vec4<f32>(b_at(k, n, true), b_at(k + 1u, n, true), b_at(k + 2u, n, true), b_at(k + 3u, n, true));
  } else {
    let k = k0 + t / 32u;
    let n = n0 + (t % 32u) * 4u;
    f.b = vec4<f32>(b_at(k, n, false), b_at(k, n + 1u, false), b_at(k, n + 2u, false), b_at(k, n + 3u, false));
  }
  return f;
}

fn stash(t: u32, buf: u32, f: Fetched, a_trans: bool, b_trans: bool) {
  let base = buf * TILE;
  if (a_trans) {
    tile_a[base + t] = f.a;
  } else {
    let m = t / 2u;
    let k = (t % 2u) * 4u;
    tile_a[base + k * 32u + m / 4u][m % 4u] = f.a.x;
    tile_a[base + (k + 1u) * 32u + m / 4u][m % 4u] = f.a.y;
    tile_a[base + (k + 2u) * 32u + m / 4u][m % 4u] = f.a.z;
    tile_a[base + (k + 3u) * 32u + m / 4u][m % 4u] = f.a.w;
  }
  if (b_trans) {
    let n = t / 2u;
    let k = (t % 2u) * 4u;
    tile_b[base + k * 32u + n / 4u][n % 4u] = f.b.x;
    tile_b[base + (k + 1u) * 32u + n / 4u][n % 4u] = f.b.y;
    tile_b[base + (k + 2u) * 32u + n / 4u][n % 4u] = f.b.z;
    tile_b[base + (k + 3u) * 32u + n / 4u][n % 4u] = f.b.w;
  } else {
    tile_b[base + t] = f.b;
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
  let tx = t % 16u;
  let ty = t / 16u;
  var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0);
  var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
  var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0);
  var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
  var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0);
  var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
  var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0);
  var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);
  stash(t, 0u, fetch(t, m0, n0, 0u, a_trans, b_trans), a_trans, b_trans);
  workgroupBarrier();
  var buf = 0u;
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    let more = k0 + BK < p.K;
    var next = Fetched(vec4<f32>(0.0), vec4<f32>(0.0));
    if (more) { next = fetch(t, m0, n0, k0 + BK, a_trans, b_trans); }
    let base = buf * TILE;
    for (var kk = 0u; kk < BK; kk++) {
      let a0 = tile_a[base + kk * 32u + ty];
      let a1 = tile_a[base + kk * 32u + 16u + ty];
      let b0 = tile_b[base + kk * 32u + tx];
      let b1 = tile_b[base + kk * 32u + 16u + tx];
      c00 += a0.x * b0; c01 += a0.x * b1;
      c10 += a0.y * b0; c11 += a0.y * b1;
      c20 += a0.z * b0; c21 += a0.z * b1;
      c30 += a0.w * b0; c31 += a0.w * b1;
      c40 += a1.x * b0; c41 += a1.x * b1;
      c50 += a1.y * b0; c51 += a1.y * b1;
      c60 += a1.z * b0; c61 += a1.z * b1;
      c70 += a1.w * b0; c71 += a1.w * b1;
    }
    if (more) { stash(t, 1u - buf, next, a_trans, b_trans); }
    workgroupBarrier();
    buf = 1u - buf;
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

@compute @workgroup_size(256)
fn matmul_colsum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) t: u32) {
  let n = wg.x * 64u + t % 64u;
  let run = (p.M + nwg.y - 1u) / nwg.y;
  let end = min(p.M, wg.y * run + run);
  var sum = 0.0;
  if (n < p.N) {
    for (var m = wg.y * run + t / 64u; m < end; m += 4u) { sum += a[m * p.N + n]; }
  }
  partial[t] = sum;
  workgroupBarrier();
  if (t < 64u && n < p.N) {
    var total = ((partial[t] + partial[t + 64u]) + partial[t + 128u]) + partial[t + 192u];
    if ((p.flags & ACCUMULATE) != 0u) { total += c[wg.y * p.N + n]; }
    c[wg.y * p.N + n] = total;
  }
}
