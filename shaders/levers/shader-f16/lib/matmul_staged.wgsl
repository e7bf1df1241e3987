// levers/shader-f16/lib/matmul_staged.wgsl: the shader-f16 lever's products, in f16, with each
// buffer's BK-step sums added into f32 accumulators (SPILL): an f16 sum over all of K is not
// accurate enough (lib/matmul_tile.wgsl).

alias staged = f16;
const SPILL = true;
