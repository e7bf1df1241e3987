// matmul_vec4.wgsl: the fast path of matmul.wgsl for shapes whose contiguous dimensions are
// multiples of 4, so that every global load and store moves 16 bytes: a, b, bias and c are
// bound as arrays of vec4<elem>. Same entry points, maths, flags, params, split and binding
// numbers as matmul.wgsl (lib/matmul_tile.wgsl); the loads and stores are lib/matmul_vec4_io.wgsl's, B's
// vec4 read here (b4):
//   matmul_nn and matmul_nt need K % 4 == 0 and N % 4 == 0; matmul_tn needs M % 4 == 0 and N % 4 == 0.
//   bias without BIAS: any buffer but c, of at least 16 bytes.
// BLOCK 128, or 64 for grids too small to fill the GPU: on the H200 the 64 block wins below about
// 128 blocks of 128x128 (e.g. 1024^3: 19.4 vs 13.1 TFLOP/s), the 128 block above (2048^3: 32.7
// vs 21.9).

#include "lib/matmul_vec4_io.wgsl"

@group(0) @binding(2) var<storage, read> b: array<vec4<elem>>;

fn b4(i: u32) -> vec4<elem> { return b[i]; }
