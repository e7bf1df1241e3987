// lib/matmul_vec4_store.wgsl: the vec4 matmuls' A, bias, C and aux bindings (16 bytes an element)
// and their store of 4 adjacent outputs of a row (bounds, a split's offset `out`, and the epilogue
// of Params.flags): lib/matmul_vec4_io.wgsl's, the coop-matrix lever's, whose products come from
// the matrix units, and matvec.wgsl's.
//
// The epilogue, on the product o in this order (facts.json wgsl.consts): BIAS o += bias[n];
// GELU_GRAD o *= gelu'(aux[i]); RESIDUAL o += aux[i]; ACCUMULATE o += c[i]; then o goes to c[i],
// and with GELU gelu(o) to c[G + i] too (lib/gelu.wgsl gelu_half: G = M·N rounded up to GELU_ALIGN
// elements, so the graph binds each half alone). GELU_GRAD and RESIDUAL are never set together.

#include "lib/gelu.wgsl"

@group(0) @binding(1) var<storage, read> a: array<vec4<elem>>;
@group(0) @binding(3) var<storage, read> bias: array<vec4<elem>>;
@group(0) @binding(4) var<storage, read_write> c: array<vec4<elem>>;
@group(0) @binding(5) var<storage, read> aux: array<vec4<elem>>;

fn store4(out: u32, m: u32, n: u32, v: vec4<elem>) {
  if (m >= p.M || n >= p.N) { return; }
  var o = v;
  let i = (out + m * p.N + n) / 4u;
  if ((p.flags & BIAS) != 0u) { o += bias[n / 4u]; }
  if ((p.flags & GELU_GRAD) != 0u) { o *= gelu_grad4(aux[i]); }
  if ((p.flags & RESIDUAL) != 0u) { o += aux[i]; }
  if ((p.flags & ACCUMULATE) != 0u) { o += c[i]; }
  if ((p.flags & GELU) != 0u) { c[gelu_half(p.M * p.N) / 4u + i] = gelu4(o); }
  c[i] = o;
}
