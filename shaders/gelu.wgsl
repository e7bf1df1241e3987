// gelu.wgsl: exact GELU, gelu(x) = x·Φ(x) with Φ the standard normal CDF (not the tanh form).
//
// gelu_forward   y = x·Φ(x)
//   bindings 0 params, 1 x [n] (read), 2 y [n] (read_write).
// gelu_backward  dx = dy·(Φ(x) + x·φ(x))
//   bindings 0 params, 1 x [n] (read), 3 dy [n] (read), 4 dx [n] (read_write).
// Both: one invocation per element (lib/grid.wgsl: workgroup 256, grid folded into y).
// gelu_forward_vec4, gelu_backward_vec4  the same, one invocation per 4 elements (16-byte loads and
//   stores) for n a multiple of 4: grid over n/4.
//
// Params: n (u32).
//
// The function and its accuracy: lib/gelu.wgsl.

#include "lib/gelu.wgsl"
#include "lib/grid.wgsl"

struct Params {
  n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> dy4: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> dx4: array<vec4<f32>>;

// gelu'(v) = Φ(v) + v·φ(v).
fn gelu_slope(v: f32) -> f32 {
  let pdf = exp(-0.5 * v * v) * 0.39894228040143268;
  return normal_cdf(v) + v * pdf;
}

@compute @workgroup_size(256)
fn gelu_forward(g: Grid) {
  let i = index(g);
  if (i < p.n) { y[i] = gelu(x[i]); }
}

@compute @workgroup_size(256)
fn gelu_backward(g: Grid) {
  let i = index(g);
  if (i < p.n) { dx[i] = dy[i] * gelu_slope(x[i]); }
}

@compute @workgroup_size(256)
fn gelu_forward_vec4(g: Grid) {
  let i = index(g);
  if (i < p.n / 4u) {
    let v = x4[i];
    y4[i] = vec4<f32>(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w));
  }
}

@compute @workgroup_size(256)
fn gelu_backward_vec4(g: Grid) {
  let i = index(g);
  if (i < p.n / 4u) {
    let v = x4[i];
    dx4[i] = dy4[i] * vec4<f32>(gelu_slope(v.x), gelu_slope(v.y), gelu_slope(v.z), gelu_slope(v.w));
  }
}
