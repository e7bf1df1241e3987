// levers/int8/matvec.wgsl: matvec.wgsl's five products (matvec_nn, matvec_nt, their _ln forms
// and matvec_nn_ln_gelu: same params, same bindings but B) over int8 weights, for sampling. B is binding 5 instead
// of 2: the int8 copy of the weight (engine/gpu/int8.ts), a block of N f32 channel scales then N
// channels of K int8 values, 4 to a u32, each channel along K whatever the orientation, so nn
// and nt run the same code; b_stride is in words of it (q, k and v in one dispatch). Each
// workgroup quantizes its input row (or the row's LayerNorm) per row into workgroup memory, as
// engine/quantize.ts does, and dot4I8Packed sums 4 products of int8 at a time in i32, exactly;
// an output is that sum times the row's scale and its channel's: the product of the dequantized
// operands. K <= MAX_K for every entry here (the row lives in workgroup memory).
// Invocation (r, s) = (t/8, t%8) sums the words s, s+8, ... of channel r of the workgroup's 32.

requires packed_4x8_integer_dot_product;

#include "matvec.wgsl"

@group(0) @binding(5) var<storage, read> w8: array<u32>;

var<workgroup> a8: array<u32, MAX_K / 4u>; // the quantized row, 4 to a word
var<workgroup> ipart: array<i32, 256>;

// The row (normalised or not) quantized into a8; returns its scale, max|x| / 127.
fn quantise(l: Lane, normalised: bool) -> f32 {
  let K4 = p.K / 4u;
  var m = 0.0;
  for (var q = l.t; q < K4; q += 256u) {
    let v = abs(a4(q, normalised));
    m = max(m, max(max(v.x, v.y), max(v.z, v.w)));
  }
  let amax = reduce_max(l, m, 256u);
  let inv = select(0.0, 127.0 / amax, amax > 0.0);
  for (var q = l.t; q < K4; q += 256u) { a8[q] = pack4xI8Clamp(vec4<i32>(round(a4(q, normalised) * inv))); }
  workgroupBarrier();
  return amax / 127.0;
}

fn int8_product(wg: vec3<u32>, t: u32, scale: f32, activate: bool) {
  let K4 = p.K / 4u;
  let s = t % LANES;
  let n = wg.x * OUTS + t / LANES;
  let block = wg.y * p.b_stride;
  var acc = 0i;
  if (n < p.N) {
    let row = block + p.N + n * K4;
    for (var q = s; q < K4; q += LANES) { acc += dot4I8Packed(a8[q], w8[row + q]); }
  }
  ipart[t] = acc;
  workgroupBarrier();
  // Invocation t < 8 finishes outputs 4t .. 4t+3 of the workgroup's 32: one vec4 store.
  let n4 = wg.x * (OUTS / 4u) + t;
  if (t < OUTS / 4u && n4 < p.N / 4u) {
    var out: vec4<f32>;
    for (var j = 0u; j < 4u; j++) {
      var sum = 0i;
      for (var i = 0u; i < LANES; i++) { sum += ipart[(4u * t + j) * LANES + i]; }
      out[j] = f32(sum) * (scale * bitcast<f32>(w8[block + 4u * n4 + j]));
    }
    emit(wg.y, n4, out, activate);
  }
}

@compute @workgroup_size(256)
fn int8_nn(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  int8_product(wg, l.t, quantise(l, false), false);
}

@compute @workgroup_size(256)
fn int8_nn_ln(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  normalise(l);
  int8_product(wg, l.t, quantise(l, true), false);
}

@compute @workgroup_size(256)
fn int8_nn_ln_gelu(@builtin(workgroup_id) wg: vec3<u32>, l: Lane) {
  normalise(l);
  int8_product(wg, l.t, quantise(l, true), true);
}
