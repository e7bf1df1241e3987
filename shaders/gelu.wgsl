// gelu.wgsl: exact GELU, gelu(x) = x·Φ(x) with Φ the standard normal CDF (not the tanh form).
//
// gelu_forward   y = x·Φ(x)
//   bindings 0 params, 1 x [n] (read), 2 y [n] (read_write).
// gelu_backward  dx = dy·(Φ(x) + x·φ(x))
//   bindings 0 params, 1 x [n] (read), 3 dy [n] (read), 4 dx [n] (read_write).
// Both: one invocation per element (lib/grid.wgsl: workgroup 256, grid folded into y).
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

@compute @workgroup_size(256)
fn gelu_forward(g: Grid) {
  let i = index(g);
  if (i < p.n) { y[i] = gelu(x[i]); }
}

@compute @workgroup_size(256)
fn gelu_backward(g: Grid) {
  let i = index(g);
  if (i < p.n) {
    let v = x[i];
    let pdf = exp(-0.5 * v * v) * 0.39894228040143268;
    dx[i] = dy[i] * (normal_cdf(v) + v * pdf);
  }
}
