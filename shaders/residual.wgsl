// residual.wgsl: the residual stream's elementwise sums.
//
// residual_add         out = a + b            (forward: x + attn(ln1(x)) into a new buffer)
//   bindings 0 params, 1 a [n] (read), 2 b [n] (read), 3 out [n] (read_write).
// residual_accumulate  out += a               (in place, e.g. x += mlp(...) or gradient sums)
//   bindings 0 params, 1 a [n] (read), 3 out [n] (read_write).
// Both: workgroup 256, one element per invocation, element index
//   (wg.y·num_workgroups.x + wg.x)·256 + local index; dispatch x = min(G, 65535),
//   y = ceil(G / x) with G = ceil(n/256).
//
// Params: n (u32).

struct Params {
  n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn index(wg: vec3<u32>, groups: vec3<u32>, t: u32) -> u32 {
  return (wg.y * groups.x + wg.x) * 256u + t;
}

@compute @workgroup_size(256)
fn residual_add(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
                @builtin(local_invocation_index) t: u32) {
  let i = index(wg, groups, t);
  if (i < p.n) { out[i] = a[i] + b[i]; }
}

@compute @workgroup_size(256)
fn residual_accumulate(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
                       @builtin(local_invocation_index) t: u32) {
  let i = index(wg, groups, t);
  if (i < p.n) { out[i] += a[i]; }
}
