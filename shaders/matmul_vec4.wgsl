// matmul_vec4.wgsl: the fast path of matmul.wgsl for shapes whose contiguous dimensions are
// multiples of 4, so that every global load and store moves 16 bytes: a, b, bias and c are
// bound as arrays of vec4<elem>. Same entry points, maths, flags, params, split and binding
// numbers as matmul.wgsl (lib/matmul_tile.wgsl):
//   matmul_nn and matmul_nt need K % 4 == 0 and N % 4 == 0; matmul_tn needs M % 4 == 0 and N % 4 == 0.
//   bias without BIAS: any buffer but c, of at least 16 bytes.
// BLOCK 128, or 64 for grids too small to fill the GPU: on the H200 the 64 block wins below about
// 128 blocks of 128x128 (e.g. 1024^3: 19.4 vs 13.1 TFLOP/s), the 128 block above (2048^3: 32.7
// vs 21.9).

#include "lib/matmul_tile.wgsl"

@group(0) @binding(1) var<storage, read> a: array<vec4<elem>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<elem>>;
@group(0) @binding(3) var<storage, read> bias: array<vec4<elem>>;
@group(0) @binding(4) var<storage, read_write> c: array<vec4<elem>>;

fn fetch(t: u32, m0: u32, n0: u32, k0: u32, kend: u32, a_trans: bool, b_trans: bool) -> Fetched {
  var f = Fetched(vec4<elem>(0.0), vec4<elem>(0.0));
  let am = origin(t, m0, k0, !a_trans);
  let bn = origin(t, n0, k0, b_trans);
  if (am.x < p.M && am.y < kend) { f.a = a[select(am.x * p.K + am.y, am.y * p.M + am.x, a_trans) / 4u]; }
  if (bn.x < p.N && bn.y < kend) { f.b = b[select(bn.y * p.N + bn.x, bn.x * p.K + bn.y, b_trans) / 4u]; }
  return f;
}

fn store4(out: u32, m: u32, n: u32, v: vec4<elem>) {
  if (m >= p.M || n >= p.N) { return; }
  var o = v;
  if ((p.flags & BIAS) != 0u) { o += bias[n / 4u]; }
  let i = (out + m * p.N + n) / 4u;
  if ((p.flags & ACCUMULATE) != 0u) { o += c[i]; }
  c[i] = o;
}
