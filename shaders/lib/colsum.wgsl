// lib/colsum.wgsl: where colsum and colsum_vec4 find their matrix among P stacked along grid z
// (x: its first element) and where a workgroup's sums go (y: after those of the matrices before
// it, then of the runs before it, n per run). `size` is a matrix's elements.

fn stacked_at(wg: vec3<u32>, nwg: vec3<u32>, size: u32, n: u32) -> vec2<u32> {
  return vec2<u32>(wg.z * size, (wg.z * nwg.y + wg.y) * n);
}
