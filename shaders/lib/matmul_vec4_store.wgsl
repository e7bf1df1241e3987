// lib/matmul_vec4_store.wgsl: the vec4 matmuls' A, bias and C bindings (16 bytes an element) and
// their store of 4 adjacent outputs of a row of block `at`'s product (bias, ACCUMULATE, bounds):
// lib/matmul_vec4_io.wgsl's, and the coop-matrix lever's, whose products come from the matrix units.

@group(0) @binding(1) var<storage, read> a: array<vec4<elem>>;
@group(0) @binding(3) var<storage, read> bias: array<vec4<elem>>;
@group(0) @binding(4) var<storage, read_write> c: array<vec4<elem>>;

fn store4(at: Block, m: u32, n: u32, v: vec4<elem>) {
  if (m >= p.M || n >= p.N) { return; }
  var o = v;
  if ((p.flags & BIAS) != 0u) { o += bias[(at.bias + n) / 4u]; }
  let i = (at.c + m * p.N + n) / 4u;
  if ((p.flags & ACCUMULATE) != 0u) { o += c[i]; }
  c[i] = o;
}
