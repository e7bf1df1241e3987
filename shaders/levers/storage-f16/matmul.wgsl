// levers/storage-f16/matmul.wgsl: matmul.wgsl's products (any shape) with B read from the
// packed-half mirror of the weights (storage-f16; the maths stays f32). Same entry points
// matmul_nn, matmul_nt, matmul_tn, params, flags, split, override BLOCK and bindings as
// matmul.wgsl but binding 2 (no colsum: it has no weight operand):
//   binding 2: b (storage, read) array<u32>: B as halves, two a u32 (pack2x16float: the lower
//              element index in the low half), at B's element offsets; a slice of the mirror
//              starting on an even element, of at least ceil(size/2)·4 bytes.
// The engine binds it for the ops whose B is a weight (see levers/storage-f16/matmul_vec4.wgsl).

#include "lib/matmul_io.wgsl"

@group(0) @binding(2) var<storage, read> b: array<u32>;

fn b_elem(i: u32) -> elem {
  return unpack2x16float(b[i / 2u])[i % 2u];
}
