// layernorm.wgsl: LayerNorm over the last dimension (biased variance, eps from Params), with the
// statistics saved for the backward pass.
//
// layernorm_forward  out = (x - mean)·rstd·weight + bias per row; saves mean and rstd.
//   bindings 0 params, 1 x [rows,C] (read), 2 weight [C] (read), 3 bias [C] (read),
//            4 out [rows,C] (read_write), 5 mean [rows] (read_write), 6 rstd [rows] (read_write).
//   workgroup 128 (one row); dispatch (rows, 1, 1), rows <= 65535.
// layernorm_forward_residual  the same of x + y (a residual add), the sum written to res: the
//   block's residual stream and the LayerNorm that reads it without a pass between.
//   bindings as layernorm_forward, and 11 y [rows,C] (read), 12 res [rows,C] (read_write).
// layernorm_backward_dx  dx = rstd·(g - mean(g) - xhat·mean(g·xhat)), g = dout·weight, per row;
//   with ACCUMULATE, dx += that (the residual stream's gradient).
//   bindings 0 params, 1 x, 2 weight, 5 mean (read), 6 rstd (read), 7 dout [rows,C] (read),
//            8 dx [rows,C] (read_write).
//   workgroup 128 (one row); dispatch (rows, 1, 1).
// layernorm_backward_params  dweight[c] = sum_rows dout·xhat, dbias[c] = sum_rows dout, rows summed
//   in a fixed order (deterministic); overwrites.
//   bindings 0 params, 1 x, 5 mean (read), 6 rstd (read), 7 dout (read), 9 dweight [C] (read_write),
//            10 dbias [C] (read_write).
//   workgroup 256 (32 columns x 8 row slices); dispatch (ceil(C/32), S, 1). With S > 1 the rows
//   are cut into S runs and workgroup row y writes its run's sums to dweight[y·C ..] and
//   dbias[y·C ..] (each S·C floats), for colsum to add: ceil(C/32) workgroups alone
//   cannot fill a GPU when there are many rows.
//
// Params: rows (u32), C (u32), eps (f32), flags (u32: bit 1 ACCUMULATE, for backward_dx).

#include "lib/reduce.wgsl"
#include "lib/split.wgsl"

struct Params {
  rows: u32,
  C: u32,
  eps: f32,
  flags: u32,
}

const WG = 128u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd_out: array<f32>;
@group(0) @binding(5) var<storage, read> mean_in: array<f32>;
@group(0) @binding(6) var<storage, read> rstd_in: array<f32>;
@group(0) @binding(7) var<storage, read> dout: array<f32>;
@group(0) @binding(8) var<storage, read_write> dx: array<f32>;
@group(0) @binding(9) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(10) var<storage, read_write> dbias: array<f32>;
@group(0) @binding(11) var<storage, read> y: array<f32>;
@group(0) @binding(12) var<storage, read_write> res: array<f32>;

var<workgroup> scratch2: array<f32, 256>; // beside lib/reduce_tree.wgsl's scratch

// The forward entry points differ only in where a row's values come from. These take an
// invocation's share of the row's sum, then of its squares about the mean, and the row's
// statistics; each invocation reads back only elements it read or wrote itself.
struct Stats {
  mean: f32,
  rstd: f32,
}

fn mean_of(l: Lane, s: f32) -> f32 {
  return reduce_sum(l, s, WG) / f32(p.C);
}

fn rstd_of(l: Lane, ss: f32) -> f32 {
  return 1.0 / sqrt(reduce_sum(l, ss, WG) / f32(p.C) + p.eps);
}

fn normalized(v: f32, i: u32, st: Stats) -> f32 {
  return (v - st.mean) * st.rstd * weight[i] + bias[i];
}

fn save_stats(l: Lane, row: u32, st: Stats) {
  if (l.t == 0u) {
    mean_out[row] = st.mean;
    rstd_out[row] = st.rstd;
  }
}

@compute @workgroup_size(128)
fn layernorm_forward(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  let base = wg.x * p.C;
  var s = 0.0;
  for (var i = l.t; i < p.C; i += WG) { s += x[base + i]; }
  let mean = mean_of(l, s);
  var ss = 0.0;
  for (var i = l.t; i < p.C; i += WG) {
    let d = x[base + i] - mean;
    ss += d * d;
  }
  let st = Stats(mean, rstd_of(l, ss));
  for (var i = l.t; i < p.C; i += WG) { out[base + i] = normalized(x[base + i], i, st); }
  save_stats(l, wg.x, st);
}

@compute @workgroup_size(128)
fn layernorm_forward_residual(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  let base = wg.x * p.C;
  var s = 0.0;
  for (var i = l.t; i < p.C; i += WG) {
    let v = x[base + i] + y[base + i];
    res[base + i] = v;
    s += v;
  }
  let mean = mean_of(l, s);
  var ss = 0.0;
  for (var i = l.t; i < p.C; i += WG) {
    let d = res[base + i] - mean;
    ss += d * d;
  }
  let st = Stats(mean, rstd_of(l, ss));
  for (var i = l.t; i < p.C; i += WG) { out[base + i] = normalized(res[base + i], i, st); }
  save_stats(l, wg.x, st);
}

@compute @workgroup_size(128)
fn layernorm_backward_dx(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  let t = l.t;
  let base = wg.x * p.C;
  let mean = mean_in[wg.x];
  let rstd = rstd_in[wg.x];
  var sg = 0.0;
  var sgx = 0.0;
  for (var i = t; i < p.C; i += WG) {
    let g = dout[base + i] * weight[i];
    sg += g;
    sgx += g * (x[base + i] - mean) * rstd;
  }
  let mean_g = reduce_sum(l, sg, WG) / f32(p.C);
  let mean_gx = reduce_sum(l, sgx, WG) / f32(p.C);
  for (var i = t; i < p.C; i += WG) {
    let xhat = (x[base + i] - mean) * rstd;
    var d = rstd * (dout[base + i] * weight[i] - mean_g - xhat * mean_gx);
    if ((p.flags & ACCUMULATE) != 0u) { d += dx[base + i]; }
    dx[base + i] = d;
  }
}

@compute @workgroup_size(256)
fn layernorm_backward_params(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) t: u32) {
  let col = wg.x * 32u + t % 32u;
  let rows = split_range(wg.y, nwg.y, p.rows, 1u);
  var sw = 0.0;
  var sb = 0.0;
  if (col < p.C) {
    for (var r = rows.x + t / 32u; r < rows.y; r += 8u) {
      let d = dout[r * p.C + col];
      sw += d * (x[r * p.C + col] - mean_in[r]) * rstd_in[r];
      sb += d;
    }
  }
  scratch[t] = sw;
  scratch2[t] = sb;
  workgroupBarrier();
  if (t < 32u && col < p.C) {
    var tw = 0.0;
    var tb = 0.0;
    for (var s = 0u; s < 8u; s++) {
      tw += scratch[s * 32u + t];
      tb += scratch2[s * 32u + t];
    }
    dweight[wg.y * p.C + col] = tw;
    dbias[wg.y * p.C + col] = tb;
  }
}
