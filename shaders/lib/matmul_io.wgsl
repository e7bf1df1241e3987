// lib/matmul_io.wgsl: matmul.wgsl's loads and stores (one element at a time, bounds-checked, for
// any shape) around lib/matmul_tile.wgsl, for every module that binds B its own way. The
// including module declares binding 2 and `fn b_elem(i: u32) -> elem`, B's i-th element: plain
// f32 in matmul.wgsl, packed halves in levers/storage-f16/matmul.wgsl.

#include "lib/matmul_tile.wgsl"

@group(0) @binding(1) var<storage, read> a: array<elem>;
@group(0) @binding(3) var<storage, read> bias: array<elem>;
@group(0) @binding(4) var<storage, read_write> c: array<elem>;

// A at (m, k) and B at (n, k), 0 outside the matrix or past the split's kend.
fn a_at(mk: vec2<u32>, kend: u32, transposed: bool) -> elem {
  if (mk.x >= p.M || mk.y >= kend) { return elem(0.0); }
  if (transposed) { return a[mk.y * p.M + mk.x]; }
  return a[mk.x * p.K + mk.y];
}

fn b_at(b0: u32, nk: vec2<u32>, kend: u32, transposed: bool) -> elem {
  if (nk.x >= p.N || nk.y >= kend) { return elem(0.0); }
  return b_elem(b0 + select(nk.y * p.N + nk.x, nk.x * p.K + nk.y, transposed));
}

fn fetch(t: u32, at: Block, k0: u32, kend: u32, a_trans: bool, b_trans: bool) -> Fetched {
  let am = origin(t, at.m0, k0, !a_trans);
  let bn = origin(t, at.n0, k0, b_trans);
  let da = select(vec2<u32>(1u, 0u), vec2<u32>(0u, 1u), !a_trans); // the step between the 4 values
  let db = select(vec2<u32>(1u, 0u), vec2<u32>(0u, 1u), b_trans);
  return Fetched(
    vec4<elem>(a_at(am, kend, a_trans), a_at(am + da, kend, a_trans), a_at(am + 2u * da, kend, a_trans), a_at(am + 3u * da, kend, a_trans)),
    vec4<elem>(b_at(at.b, bn, kend, b_trans), b_at(at.b, bn + db, kend, b_trans), b_at(at.b, bn + 2u * db, kend, b_trans), b_at(at.b, bn + 3u * db, kend, b_trans)));
}

fn store4(at: Block, m: u32, n: u32, v: vec4<elem>) {
  if (m >= p.M) { return; }
  for (var j = 0u; j < 4u; j++) {
    let col = n + j;
    if (col < p.N) {
      var o = v[j];
      if ((p.flags & BIAS) != 0u) { o += bias[at.bias + col]; }
      let i = at.c + m * p.N + col;
      if ((p.flags & ACCUMULATE) != 0u) { o += c[i]; }
      c[i] = o;
    }
  }
}
