// levers/shader-f16/matmul_vec4.wgsl: matmul_vec4.wgsl with its arithmetic in f16 (the shader-f16
// lever, webapp/levers/shader-f16/): the same bindings, params, entry points, BLOCK and split, and
// f32 in global memory. Loads are converted to f16 as they are staged (the workgroup tiles take
// half the memory), products are vec4<f16> (packed half FMAs, twice the f32 rate on NVIDIA), and
// each buffer's BK-step f16 sums go into f32 accumulators (SPILL): an f16 sum over all of K is
// not accurate enough. f16's range (6e-5 smallest normal) suits activations times weights, not
// gradients: the lever uses this module only where its measured error passes the gate.

enable f16;

#include "lib/matmul_tile.wgsl"
#include "lib/matmul_vec4_io.wgsl"

alias staged = f16;
const SPILL = true;
