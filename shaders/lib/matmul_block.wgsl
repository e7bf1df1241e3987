// lib/matmul_block.wgsl: the block of C a matmul workgroup computes, and where its operands are:
// lib/matmul_tile.wgsl's and the coop-matrix lever's. Grid x walks N's blocks; grid y walks M's
// blocks of each of P products stacked in memory (P = num_workgroups.y / ceil(M / BLOCK); 1 but
// for the graph's q, k and v): product j reads the whole of A, B at j·K·N and the bias at j·N,
// and writes C at j·M·N; grid z walks the S splits of K, whose partial products start at
// z·P·M·N. The including module declares Params p and the override BLOCK.

struct Block {
  m0: u32, // the block's first row and column in C
  n0: u32,
  b: u32, // where its product's B, bias and C start (elements)
  bias: u32,
  c: u32,
}

fn block_of(wg: vec3<u32>, groups: vec3<u32>) -> Block {
  let row_blocks = (p.M + BLOCK - 1u) / BLOCK;
  let j = wg.y / row_blocks;
  let products = groups.y / row_blocks;
  return Block((wg.y % row_blocks) * BLOCK, wg.x * BLOCK, j * p.K * p.N, j * p.N, (wg.z * products + j) * p.M * p.N);
}
