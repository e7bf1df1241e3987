// levers/int8/matvec.wgsl: matvec.wgsl's five products (matvec_nn, matvec_nt, their _ln forms
// and matvec_nn_ln_gelu: same params, same bindings but B) over int8 weights, for sampling. B is binding 5 instead
// of 2: the int8 copy of the weight (engine/gpu/int8.ts), a block of N f32 channel scales then N
// channels of K int8 values, 4 to a u32, each channel along K whatever the orientation, so nn
// and nt run the same code; b_stride is in words of it (q, k and v in one dispatch). Each
// workgroup quantizes its input row (or the row's LayerNorm) per row into workgroup memory, as
// engine/quantize.ts does, and dot4I8Packed sums 4 products of int8 at a time in i32, exactly;
// an output is that sum times the row's scale and its channel's: the product of the dequantized
// operands. K <= MAX_K for every entry here (the row lives in workgroup memory).
// Invocation (r, s) = (t / LANES, t % LANES) sums the words s, s+LANES, ... of channel r of the
// workgroup's OUTS (at OUTS 32: 8 invocations a channel, as matvec.wgsl's nt).
//
// int8_quantize_nn, int8_quantize_nt make that copy of one weight on the GPU whenever the
// parameters changed (engine/gpu/int8.ts recordInt8Copy): B at binding 2 is the f32 weight, [K, N]
// (nn: a channel is a column) or [N, K] (nt: a row), binding 5 its block, written. A channel is
// quantized as `quantise` quantizes a row (the same max, inverse and rounding: quantize.ts's
// scheme), its scale stored at word n. Workgroup 256, CHANNELS_Q channels each (an override the
// int8 lever's table sets, 64, and sizes the dispatch by: (ceil(N / CHANNELS_Q), 1, 1); a power of
// 2 up to 256); M, flags, eps and the strides are unused. Four invocations a channel (at 64) and
// one barrier rather than a workgroup a channel and reduce_max's tree: on SwiftShader the tree made
// Huge's copy in 18 s, this in 0.3 s.

requires packed_4x8_integer_dot_product;

#include "matvec.wgsl"

@group(0) @binding(5) var<storage, read> w8: array<u32>;
@group(0) @binding(5) var<storage, read_write> w8_out: array<u32>; // the quantize entry points' (no entry point uses both)

var<workgroup> a8: array<u32, MAX_K / 4u>; // the quantized row, 4 to a word
var<workgroup> ipart: array<i32, 256>;

// The largest |x| of 4 values, and of m.
fn max_abs4(m: f32, x: vec4<f32>) -> f32 {
  let v = abs(x);
  return max(m, max(max(v.x, v.y), max(v.z, v.w)));
}

// 127 / max|x|: what a row or channel of that max is multiplied by before rounding (0 for zeros).
fn inverse_scale(amax: f32) -> f32 {
  return select(0.0, 127.0 / amax, amax > 0.0);
}

// 4 values times `inv`, rounded half to even, packed (element k in byte k % 4).
fn quantize4(x: vec4<f32>, inv: f32) -> u32 {
  return pack4xI8Clamp(vec4<i32>(round(x * inv)));
}

// The row (normalised or not) quantized into a8; returns its scale, max|x| / 127.
fn quantise(l: Lane, normalised: bool) -> f32 {
  let K4 = p.K / 4u;
  var m = 0.0;
  for (var q = l.t; q < K4; q += 256u) { m = max_abs4(m, a4(q, normalised)); }
  let amax = reduce_max(l, m, 256u);
  let inv = inverse_scale(amax);
  for (var q = l.t; q < K4; q += 256u) { a8[q] = quantize4(a4(q, normalised), inv); }
  workgroupBarrier();
  return amax / 127.0;
}

// Channel n's weights 4q .. 4q+3 along K: a vec4 of an [N, K] weight, a column's 4 rows of a [K, N] one.
fn channel4(n: u32, q: u32, transposed: bool) -> vec4<f32> {
  if (!transposed) { return b[n * (p.K / 4u) + q]; }
  let N4 = p.N / 4u;
  let i = 4u * q * N4 + n / 4u;
  let j = n % 4u;
  return vec4<f32>(b[i][j], b[i + N4][j], b[i + 2u * N4][j], b[i + 3u * N4][j]);
}

override CHANNELS_Q: u32; // channels per workgroup of the quantize entry points (lever.ts sets it)
override SLICES_Q = 256u / CHANNELS_Q; // invocations per channel there

// Channels wg.x * CHANNELS_Q .. + CHANNELS_Q - 1 of the weight into its block: each channel's
// scale, then its K values 4 to a word. Invocation s of a channel's SLICES_Q takes its words s,
// s+SLICES_Q, ...; their partial maxima meet in matvec.wgsl's `part`. At CHANNELS_Q 64: nn: (s, c) =
// (t/64, t%64), so 64 neighbours read 256 contiguous bytes of a row of the [K, N] weight; nt: (c, s)
// = (t/4, t%4), 4 neighbours 64 contiguous bytes of a channel.
fn quantize_channels(wg: vec3<u32>, t: u32, transposed: bool) {
  let c = select(t / SLICES_Q, t % CHANNELS_Q, transposed);
  let s = select(t % SLICES_Q, t / CHANNELS_Q, transposed);
  let n = wg.x * CHANNELS_Q + c;
  let K4 = p.K / 4u;
  var m = 0.0;
  if (n < p.N) {
    for (var q = s; q < K4; q += SLICES_Q) { m = max_abs4(m, channel4(n, q, transposed)); }
  }
  part[s * CHANNELS_Q + c] = m;
  workgroupBarrier();
  if (n >= p.N) { return; }
  var amax = 0.0;
  for (var i = 0u; i < SLICES_Q; i++) { amax = max(amax, part[i * CHANNELS_Q + c]); }
  let inv = inverse_scale(amax);
  for (var q = s; q < K4; q += SLICES_Q) { w8_out[p.N + n * K4 + q] = quantize4(channel4(n, q, transposed), inv); }
  if (s == 0u) { w8_out[n] = bitcast<u32>(amax / 127.0); }
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
  // Invocation t < OUTS / 4 finishes outputs 4t .. 4t+3 of the workgroup's OUTS: one vec4 store.
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

@compute @workgroup_size(256)
fn int8_quantize_nn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  quantize_channels(wg, t, true);
}

@compute @workgroup_size(256)
fn int8_quantize_nt(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  quantize_channels(wg, t, false);
}
