// lib/matmul_staged.wgsl: the type lib/matmul_tile.wgsl multiplies in, and whether it adds each
// buffer's sums into `elem` accumulators (SPILL). Plain: `elem`, one run of sums over all of K.
// The shader-f16 lever #replaces this file with levers/shader-f16/lib/matmul_staged.wgsl.

alias staged = elem;
const SPILL = false;
