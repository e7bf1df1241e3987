// crossentropy.wgsl: softmax cross-entropy fused with its gradient; loss = mean over positions.
//
// crossentropy_forward  per row r: lse[r] = logsumexp(logits[r,:]), losses[r] = lse[r] - logits[r, targets[r]]
//   bindings 0 params, 1 logits [rows,V] (read), 2 targets [rows] u32 (read),
//            3 losses [rows] (read_write), 4 lse [rows] (read_write).
//   workgroup 256 (one row); dispatch (rows, 1, 1), rows <= 65535.
// crossentropy_backward  dlogits[r,c] = (exp(logits[r,c] - lse[r]) - [c == targets[r]]) / rows
//   bindings 0 params, 1 logits, 2 targets, 5 lse (read), 6 dlogits [rows,V] (read_write).
//   workgroup 256 (one row); dispatch (rows, 1, 1).
// crossentropy_mean  loss[0] = sum(losses) / rows, summed in a fixed order (deterministic).
//   bindings 0 params, 7 losses (read), 8 loss [1] (read_write).
//   workgroup 256; dispatch (1, 1, 1).
//
// Params: rows, V (u32).

#include "lib/reduce.wgsl"

struct Params {
  rows: u32,
  V: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<u32>;
@group(0) @binding(3) var<storage, read_write> losses: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse_out: array<f32>;
@group(0) @binding(5) var<storage, read> lse_in: array<f32>;
@group(0) @binding(6) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(7) var<storage, read> losses_in: array<f32>;
@group(0) @binding(8) var<storage, read_write> loss: array<f32>;

@compute @workgroup_size(256)
fn crossentropy_forward(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  let t = l.t;
  let base = wg.x * p.V;
  var m = -3.0e38;
  for (var c = t; c < p.V; c += 256u) { m = max(m, logits[base + c]); }
  m = reduce_max(l, m, 256u);
  var s = 0.0;
  for (var c = t; c < p.V; c += 256u) { s += exp(logits[base + c] - m); }
  let lse = m + log(reduce_sum(l, s, 256u));
  if (t == 0u) {
    losses[wg.x] = lse - logits[base + targets[wg.x]];
    lse_out[wg.x] = lse;
  }
}

@compute @workgroup_size(256)
fn crossentropy_backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let base = wg.x * p.V;
  let lse = lse_in[wg.x];
  let label = targets[wg.x];
  let inv_rows = 1.0 / f32(p.rows);
  for (var c = t; c < p.V; c += 256u) {
    let prob = exp(logits[base + c] - lse);
    dlogits[base + c] = (prob - select(0.0, 1.0, c == label)) * inv_rows;
  }
}

@compute @workgroup_size(256)
fn crossentropy_mean(l: Lane) {
  let t = l.t;
  var s = 0.0;
  for (var r = t; r < p.rows; r += 256u) { s += losses_in[r]; }
  let total = reduce_sum(l, s, 256u);
  if (t == 0u) { loss[0] = total / f32(p.rows); }
}
