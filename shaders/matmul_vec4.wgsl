// matmul_vec4.wgsl: the fast path of matmul.wgsl for shapes whose contiguous dimensions are
// multiples of 4, so that every global load and store moves 16 bytes: a, b, bias and c are
// bound as arrays of vec4<f32>. Same maths, flags, params and bindings as matmul.wgsl.
//
// matmul_vec4_nn  C[M,N] = A[M,K]·B[K,N]     needs K % 4 == 0 and N % 4 == 0
// matmul_vec4_nt  C[M,N] = A[M,K]·B[N,K]ᵀ    needs K % 4 == 0 and N % 4 == 0
// matmul_vec4_tn  C[M,N] = A[K,M]ᵀ·B[K,N]    needs M % 4 == 0 and N % 4 == 0
//   128x128 block, 8x8 per invocation; workgroup 256; dispatch (ceil(N/128), ceil(M/128), 1).
// matmul_vec4_nn_64, matmul_vec4_nt_64, matmul_vec4_tn_64: the same with a 64x64 block, 4x4 per
//   invocation, 16 k-steps per buffer; workgroup 256; dispatch (ceil(N/64), ceil(M/64), 1).
//   For grids too small to fill the GPU: on the H200 the 64 block wins below about 128 blocks
//   of 128x128 (e.g. 1024^3: 19.4 vs 13.1 TFLOP/s), the 128 block above (2048^3: 32.7 vs 21.9).
// Every entry point can split K (for weight gradients: small outputs, long K): dispatched with
//   z = S > 1, workgroup z sums its own run of K and stores to c[z·M·N ..], S partial products
//   that matmul_colsum then adds in a fixed order (deterministic, no atomics). With S > 1, c holds
//   S·M·N floats and flags must be 0.
//   group 0 binding 0: params (uniform Params: M, N, K, flags as matmul.wgsl)
//           binding 1: a    (storage, read)        array<vec4<f32>>
//           binding 2: b    (storage, read)        array<vec4<f32>>
//           binding 3: bias (storage, read)        array<vec4<f32>>, [N]; without BIAS any buffer but c
//                                                  (every binding here at least 16 bytes)
//           binding 4: c    (storage, read_write)  array<vec4<f32>>, [M,N]
//
// Both blocks double-buffer A and B through 16 KiB of workgroup memory (the WebGPU default
// limit) with the next step's global loads issued before this step's arithmetic.
// Out-of-range blocks load as 0 and are not stored.

struct Params {
  M: u32,
  N: u32,
  K: u32,
  flags: u32,
}

const BK128 = 8u;  // k-steps per buffer, 128x128 block
const BK64 = 16u;  // k-steps per buffer, 64x64 block
const TILE = 256u; // vec4s per buffer: BK128 k-rows of 32, or BK64 of 16

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> c: array<vec4<f32>>;

var<workgroup> tile_a: array<vec4<f32>, 512>; // 2 buffers x [k][m/4]
var<workgroup> tile_b: array<vec4<f32>, 512>; // 2 buffers x [k][n/4]

// The 4 values of A and of B one invocation carries from global to workgroup memory per step,
// taken along whichever dimension is contiguous in memory.
struct Fetched {
  a: vec4<f32>,
  b: vec4<f32>,
}

// The k range [x, y) of split z of `splits`: equal runs of whole 16-step chunks (a multiple of
// both blocks' BK), so every split but the last starts and ends on a buffer boundary.
fn k_split(z: u32, splits: u32) -> vec2<u32> {
  let chunk = ((p.K + splits - 1u) / splits + 15u) / 16u * 16u;
  return vec2<u32>(min(p.K, z * chunk), min(p.K, z * chunk + chunk));
}

fn fetch128(t: u32, m0: u32, n0: u32, k0: u32, kend: u32, a_trans: bool, b_trans: bool) -> Fetched {
  var f = Fetched(vec4<f32>(0.0), vec4<f32>(0.0));
  if (a_trans) { // A [K, M]: row k0 + t/32, m quad t%32
    let k = k0 + t / 32u;
    let m = m0 + (t % 32u) * 4u;
    if (k < kend && m < p.M) { f.a = a[(k * p.M + m) / 4u]; }
  } else { // A [M, K]: row m0 + t/2, k quad t%2
    let m = m0 + t / 2u;
    let k = k0 + (t % 2u) * 4u;
    if (m < p.M && k < kend) { f.a = a[(m * p.K + k) / 4u]; }
  }
  if (b_trans) { // B [N, K]
    let n = n0 + t / 2u;
    let k = k0 + (t % 2u) * 4u;
    if (n < p.N && k < kend) { f.b = b[(n * p.K + k) / 4u]; }
  } else { // B [K, N]
    let k = k0 + t / 32u;
    let n = n0 + (t % 32u) * 4u;
    if (k < kend && n < p.N) { f.b = b[(k * p.N + n) / 4u]; }
  }
  return f;
}

fn stash128(t: u32, buf: u32, f: Fetched, a_trans: bool, b_trans: bool) {
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

fn store4(base: u32, m: u32, n: u32, v: vec4<f32>) {
  if (m >= p.M || n >= p.N) { return; }
  var out = v;
  if ((p.flags & BIAS) != 0u) { out += bias[n / 4u]; }
  let i = base + (m * p.N + n) / 4u;
  if ((p.flags & ACCUMULATE) != 0u) { out += c[i]; }
  c[i] = out;
}

fn matmul128(wg: vec3<u32>, splits: u32, t: u32, a_trans: bool, b_trans: bool) {
  let ks = k_split(wg.z, splits);
  let out = wg.z * (p.M * p.N / 4u);
  let m0 = wg.y * 128u;
  let n0 = wg.x * 128u;
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
  stash128(t, 0u, fetch128(t, m0, n0, ks.x, ks.y, a_trans, b_trans), a_trans, b_trans);
  workgroupBarrier();
  var buf = 0u;
  for (var k0 = ks.x; k0 < ks.y; k0 += BK128) {
    let more = k0 + BK128 < ks.y;
    var next = Fetched(vec4<f32>(0.0), vec4<f32>(0.0));
    if (more) { next = fetch128(t, m0, n0, k0 + BK128, ks.y, a_trans, b_trans); }
    let base = buf * TILE;
    for (var kk = 0u; kk < BK128; kk++) {
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
    if (more) { stash128(t, 1u - buf, next, a_trans, b_trans); }
    workgroupBarrier();
    buf = 1u - buf;
  }
  let r0 = m0 + ty * 4u;
  let r1 = m0 + 64u + ty * 4u;
  let q0 = n0 + tx * 4u;
  let q1 = n0 + 64u + tx * 4u;
  store4(out, r0, q0, c00); store4(out, r0, q1, c01);
  store4(out, r0 + 1u, q0, c10); store4(out, r0 + 1u, q1, c11);
  store4(out, r0 + 2u, q0, c20); store4(out, r0 + 2u, q1, c21);
  store4(out, r0 + 3u, q0, c30); store4(out, r0 + 3u, q1, c31);
  store4(out, r1, q0, c40); store4(out, r1, q1, c41);
  store4(out, r1 + 1u, q0, c50); store4(out, r1 + 1u, q1, c51);
  store4(out, r1 + 2u, q0, c60); store4(out, r1 + 2u, q1, c61);
  store4(out, r1 + 3u, q0, c70); store4(out, r1 + 3u, q1, c71);
}

fn fetch64(t: u32, m0: u32, n0: u32, k0: u32, kend: u32, a_trans: bool, b_trans: bool) -> Fetched {
  var f = Fetched(vec4<f32>(0.0), vec4<f32>(0.0));
  if (a_trans) { // A [K, M]: row k0 + t/16, m quad t%16
    let k = k0 + t / 16u;
    let m = m0 + (t % 16u) * 4u;
    if (k < kend && m < p.M) { f.a = a[(k * p.M + m) / 4u]; }
  } else { // A [M, K]: row m0 + t/4, k quad t%4
    let m = m0 + t / 4u;
    let k = k0 + (t % 4u) * 4u;
    if (m < p.M && k < kend) { f.a = a[(m * p.K + k) / 4u]; }
  }
  if (b_trans) { // B [N, K]
    let n = n0 + t / 4u;
    let k = k0 + (t % 4u) * 4u;
    if (n < p.N && k < kend) { f.b = b[(n * p.K + k) / 4u]; }
  } else { // B [K, N]
    let k = k0 + t / 16u;
    let n = n0 + (t % 16u) * 4u;
    if (k < kend && n < p.N) { f.b = b[(k * p.N + n) / 4u]; }
  }
  return f;
}

fn stash64(t: u32, buf: u32, f: Fetched, a_trans: bool, b_trans: bool) {
  let base = buf * TILE;
  if (a_trans) {
    tile_a[base + t] = f.a;
  } else {
    let m = t / 4u;
    let k = (t % 4u) * 4u;
    tile_a[base + k * 16u + m / 4u][m % 4u] = f.a.x;
    tile_a[base + (k + 1u) * 16u + m / 4u][m % 4u] = f.a.y;
    tile_a[base + (k + 2u) * 16u + m / 4u][m % 4u] = f.a.z;
    tile_a[base + (k + 3u) * 16u + m / 4u][m % 4u] = f.a.w;
  }
  if (b_trans) {
    let n = t / 4u;
    let k = (t % 4u) * 4u;
    tile_b[base + k * 16u + n / 4u][n % 4u] = f.b.x;
    tile_b[base + (k + 1u) * 16u + n / 4u][n % 4u] = f.b.y;
    tile_b[base + (k + 2u) * 16u + n / 4u][n % 4u] = f.b.z;
    tile_b[base + (k + 3u) * 16u + n / 4u][n % 4u] = f.b.w;
  } else {
    tile_b[base + t] = f.b;
  }
}

fn matmul64(wg: vec3<u32>, splits: u32, t: u32, a_trans: bool, b_trans: bool) {
  let ks = k_split(wg.z, splits);
  let out = wg.z * (p.M * p.N / 4u);
  let m0 = wg.y * 64u;
  let n0 = wg.x * 64u;
  let tx = t % 16u; // columns tx*4..
  let ty = t / 16u; // rows ty*4..
  var c0 = vec4<f32>(0.0);
  var c1 = vec4<f32>(0.0);
  var c2 = vec4<f32>(0.0);
  var c3 = vec4<f32>(0.0);
  stash64(t, 0u, fetch64(t, m0, n0, ks.x, ks.y, a_trans, b_trans), a_trans, b_trans);
  workgroupBarrier();
  var buf = 0u;
  for (var k0 = ks.x; k0 < ks.y; k0 += BK64) {
    let more = k0 + BK64 < ks.y;
    var next = Fetched(vec4<f32>(0.0), vec4<f32>(0.0));
    if (more) { next = fetch64(t, m0, n0, k0 + BK64, ks.y, a_trans, b_trans); }
    let base = buf * TILE;
    for (var kk = 0u; kk < BK64; kk++) {
      let av = tile_a[base + kk * 16u + ty];
      let bv = tile_b[base + kk * 16u + tx];
      c0 += av.x * bv;
      c1 += av.y * bv;
      c2 += av.z * bv;
      c3 += av.w * bv;
    }
    if (more) { stash64(t, 1u - buf, next, a_trans, b_trans); }
    workgroupBarrier();
    buf = 1u - buf;
  }
  let r = m0 + ty * 4u;
  let q = n0 + tx * 4u;
  store4(out, r, q, c0);
  store4(out, r + 1u, q, c1);
  store4(out, r + 2u, q, c2);
  store4(out, r + 3u, q, c3);
}

@compute @workgroup_size(256)
fn matmul_vec4_nn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul128(wg, nwg.z, t, false, false);
}

@compute @workgroup_size(256)
fn matmul_vec4_nt(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul128(wg, nwg.z, t, false, true);
}

@compute @workgroup_size(256)
fn matmul_vec4_tn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul128(wg, nwg.z, t, true, false);
}

@compute @workgroup_size(256)
fn matmul_vec4_nn_64(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul64(wg, nwg.z, t, false, false);
}

@compute @workgroup_size(256)
fn matmul_vec4_nt_64(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul64(wg, nwg.z, t, false, true);
}

@compute @workgroup_size(256)
fn matmul_vec4_tn_64(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  matmul64(wg, nwg.z, t, true, false);
}
