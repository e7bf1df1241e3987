// lib/matmul_vec4_io.wgsl: matmul_vec4.wgsl's loads and stores (16 bytes each: a, bias and c as
// arrays of vec4<elem>) around lib/matmul_tile.wgsl, for every module that binds B its own way.
// The including module declares binding 2 and `fn b4(i: u32) -> vec4<elem>`, B's i-th vec4 of 4
// consecutive elements (along N, or along K when transposed): plain f32 in matmul_vec4.wgsl,
// packed halves in levers/storage-f16/matmul_vec4.wgsl.

#include "lib/matmul_tile.wgsl"
#include "lib/matmul_vec4_store.wgsl"

fn fetch(t: u32, at: Block, k0: u32, kend: u32, a_trans: bool, b_trans: bool) -> Fetched {
  var f = Fetched(vec4<elem>(0.0), vec4<elem>(0.0));
  let am = origin(t, at.m0, k0, !a_trans);
  let bn = origin(t, at.n0, k0, b_trans);
  if (am.x < p.M && am.y < kend) { f.a = a[select(am.x * p.K + am.y, am.y * p.M + am.x, a_trans) / 4u]; }
  if (bn.x < p.N && bn.y < kend) { f.b = b4((at.b + select(bn.y * p.N + bn.x, bn.x * p.K + bn.y, b_trans)) / 4u); }
  return f;
}
