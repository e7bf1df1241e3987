// levers/shader-f16/matmul_vec4.wgsl: matmul_vec4.wgsl with its arithmetic in f16 (the shader-f16
// lever, webapp/levers/shader-f16/): the same bindings, params, entry points, BLOCK and split, and
// f32 in global and workgroup memory. Tiles are converted to f16 as they are read, products are
// vec4<f16> (packed half FMAs, twice the f32 rate on NVIDIA), and each buffer's BK-step f16 sums
// go into f32 accumulators (SPILL): an f16 sum over all of K is not accurate enough. f16's range (6e-5 smallest normal) suits activations times weights, not
// gradients: the lever uses this module only where its measured error passes the gate.

enable f16;

#replace "lib/matmul_staged.wgsl" with "levers/shader-f16/lib/matmul_staged.wgsl"
#include "matmul_vec4.wgsl"
