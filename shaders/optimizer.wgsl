// optimizer.wgsl: global-norm gradient clipping and AdamW over flat f32 buffers (all parameters
// concatenated in the canonical order; grads, m and v laid out the same way).
//
// grad_norm_partial  partials[w] = sum of grad[i]^2 over the elements workgroup w owns
//   (element i belongs to invocation i mod (P·256) of workgroup (i / 256) mod P, P = n_partials).
//   bindings 0 params (n, n_partials), 1 grad [n] (read), 2 partials [n_partials] (read_write).
//   workgroup 256; dispatch (n_partials, 1, 1), n_partials <= 65535 (e.g. min(ceil(n/256), 1024)).
// grad_norm_final  norm[0] = sqrt(sum partials), norm[1] = clip scale: grad_clip/norm when
//   norm > grad_clip, else 1 (as tinygpt/train.py clip_grad_norm).
//   bindings 0 params (n_partials, grad_clip), 3 partials (read), 4 norm [2] (read_write).
//   workgroup 256; dispatch (1, 1, 1).
// adamw  for i in [offset, offset + n): g = grad·norm[1];
//   m = b1·m + (1-b1)·g; v = b2·v + (1-b2)·g²;
//   p -= lr·((m/bc1) / (sqrt(v/bc2) + eps) + weight_decay·p)
//   with bc1 = 1 - b1^step, bc2 = 1 - b2^step computed on the host (step counts from 1), and
//   weight_decay 0 for tensors that take none (1-D ones). Dispatch once per run of tensors with
//   the same decay, or once per tensor.
//   bindings 0 params, 1 grad (read), 5 norm (read), 6 param (read_write), 7 m (read_write),
//            8 v (read_write).
//   one invocation per element of n (lib/grid.wgsl: workgroup 256, grid folded into y).
//
// Params: n (u32), n_partials (u32), offset (u32), grad_clip, lr, beta1, beta2, eps,
//   weight_decay, bc1, bc2 (f32); each entry point reads only the fields it names above.

#include "lib/grid.wgsl"
#include "lib/reduce.wgsl"

struct Params {
  n: u32,
  n_partials: u32,
  offset: u32,
  grad_clip: f32,
  lr: f32,
  beta1: f32,
  beta2: f32,
  eps: f32,
  weight_decay: f32,
  bc1: f32,
  bc2: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;
@group(0) @binding(3) var<storage, read> partials_in: array<f32>;
@group(0) @binding(4) var<storage, read_write> norm: array<f32>;
@group(0) @binding(5) var<storage, read> norm_in: array<f32>;
@group(0) @binding(6) var<storage, read_write> param: array<f32>;
@group(0) @binding(7) var<storage, read_write> m: array<f32>;
@group(0) @binding(8) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(256)
fn grad_norm_partial(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  let t = l.t;
  var s = 0.0;
  for (var i = wg.x * 256u + t; i < p.n; i += p.n_partials * 256u) { s += grad[i] * grad[i]; }
  let total = reduce_sum(l, s, 256u);
  if (t == 0u) { partials[wg.x] = total; }
}

@compute @workgroup_size(256)
fn grad_norm_final(l: Lane) {
  let t = l.t;
  var s = 0.0;
  for (var i = t; i < p.n_partials; i += 256u) { s += partials_in[i]; }
  let total = sqrt(reduce_sum(l, s, 256u));
  if (t == 0u) {
    norm[0] = total;
    norm[1] = select(1.0, p.grad_clip / total, total > p.grad_clip);
  }
}

// AdamW on element i: the adamw entry's maths, which levers/storage-f16/optimizer.wgsl runs too.
fn adamw_at(i: u32) {
  let g = grad[i] * norm_in[1];
  let mi = p.beta1 * m[i] + (1.0 - p.beta1) * g;
  let vi = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  let update = (mi / p.bc1) / (sqrt(vi / p.bc2) + p.eps) + p.weight_decay * param[i];
  param[i] -= p.lr * update;
}

@compute @workgroup_size(256)
fn adamw(grid: Grid) {
  let k = index(grid);
  if (k >= p.n) { return; }
  adamw_at(p.offset + k);
}
