// lib/split.wgsl: how a kernel that cuts its reduction into S runs, one per workgroup along a
// grid dimension, finds its run; colsum then adds the S partial results in a fixed order.

// The range [x, y) of run z of `splits` over n: equal runs, each a multiple of `align` long.
fn split_range(z: u32, splits: u32, n: u32, align: u32) -> vec2<u32> {
  let run = ((n + splits - 1u) / splits + align - 1u) / align * align;
  return vec2<u32>(min(n, z * run), min(n, z * run + run));
}
