// lib/reduce.wgsl: the sum or the max of one value per invocation over a workgroup, in a fixed
// tree order (deterministic). Every invocation gets the result, and the closing barrier frees
// scratch for the next call.

var<workgroup> scratch: array<f32, 256>;

// Over invocations 0 .. n-1: n a power of two up to 256, the same in the whole workgroup.
fn reduce(t: u32, v: f32, n: u32, take_max: bool) -> f32 {
  scratch[t] = v;
  workgroupBarrier();
  for (var stride = n / 2u; stride > 0u; stride /= 2u) {
    if (t < stride) {
      let x = scratch[t];
      let y = scratch[t + stride];
      scratch[t] = select(x + y, max(x, y), take_max);
    }
    workgroupBarrier();
  }
  let total = scratch[0];
  workgroupBarrier();
  return total;
}

fn reduce_sum(t: u32, v: f32, n: u32) -> f32 {
  return reduce(t, v, n, false);
}

fn reduce_max(t: u32, v: f32, n: u32) -> f32 {
  return reduce(t, v, n, true);
}
