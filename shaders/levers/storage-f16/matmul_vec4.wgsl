// levers/storage-f16/matmul_vec4.wgsl: matmul_vec4.wgsl with B read from the packed-half mirror of
// the weights (storage-f16: half the bytes of the weight loads; the maths stays f32). Same entry
// points, params, flags, split, override BLOCK and bindings as matmul_vec4.wgsl but binding 2:
//   binding 2: b (storage, read) array<vec2<u32>>: B as halves, two a u32 (pack2x16float: the
//              lower element index in the low half), at B's element offsets; a slice of the mirror
//              starting on an even element, of at least ceil(size/4)·8 bytes.
// The engine binds it for the ops whose B is a weight (matmul_nn: y = x·W and dln = dlogits·wte;
// matmul_nt: dx = dy·Wᵀ and logits = x·wteᵀ), as the kernel's weightsFromMirror field says.
// pack2x16float and unpack2x16float are core WGSL: no shader-f16 needed.

#include "lib/matmul_vec4_io.wgsl"

@group(0) @binding(2) var<storage, read> b: array<vec2<u32>>;

fn b4(i: u32) -> vec4<elem> {
  let h = b[i];
  return vec4<elem>(unpack2x16float(h.x), unpack2x16float(h.y));
}
