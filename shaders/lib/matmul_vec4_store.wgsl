// lib/matmul_vec4_store.wgsl: the vec4 matmuls' A, bias and C bindings (16 bytes an element) and
// their store of 4 adjacent outputs of a row (bias, ACCUMULATE, bounds, a split's offset `out`):
// lib/matmul_vec4_io.wgsl's, and the coop-matrix lever's, whose products come from the matrix units.

@group(0) @binding(1) var<storage, read> a: array<vec4<elem>>;
@group(0) @binding(3) var<storage, read> bias: array<vec4<elem>>;
@group(0) @binding(4) var<storage, read_write> c: array<vec4<elem>>;

fn store4(out: u32, m: u32, n: u32, v: vec4<elem>) {
  if (m >= p.M || n >= p.N) { return; }
  var o = v;
  if ((p.flags & BIAS) != 0u) { o += bias[n / 4u]; }
  let i = (out + m * p.N + n) / 4u;
  if ((p.flags & ACCUMULATE) != 0u) { o += c[i]; }
  c[i] = o;
}
