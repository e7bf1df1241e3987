// residual.wgsl: the residual stream's elementwise sum.
//
// residual_add         out = a + b            (forward: x + attn(ln1(x)) into a new buffer)
//   bindings 0 params, 1 a [n] (read), 2 b [n] (read), 3 out [n] (read_write).
// One invocation per element (lib/grid.wgsl: workgroup 256, grid folded into y).
// residual_add_vec4    the same, one invocation per 4 elements (16-byte loads and stores) for n a
//   multiple of 4: grid over n/4.
//
// Params: n (u32).

#include "lib/grid.wgsl"

struct Params {
  n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@group(0) @binding(1) var<storage, read> a4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out4: array<vec4<f32>>;

@compute @workgroup_size(256)
fn residual_add(g: Grid) {
  let i = index(g);
  if (i < p.n) { out[i] = a[i] + b[i]; }
}

@compute @workgroup_size(256)
fn residual_add_vec4(g: Grid) {
  let i = index(g);
  if (i < p.n / 4u) { out4[i] = a4[i] + b4[i]; }
}
