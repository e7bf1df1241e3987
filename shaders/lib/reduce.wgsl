// lib/reduce.wgsl: the sum or the max of one value per invocation over a workgroup, in a fixed
// tree order (deterministic). Every invocation gets the result, and the closing barrier frees
// scratch for the next call. An entry point that reduces takes a Lane, which names the builtins a
// reduction needs: the subgroups lever's version of this file (levers/subgroups/lib/reduce.wgsl)
// replaces it under the same entry points, and its Lane holds the subgroup builtins too.

struct Lane {
  @builtin(local_invocation_index) t: u32,
}

var<workgroup> scratch: array<f32, 256>;

// Over invocations 0 .. n-1: n a power of two up to 256, the same in the whole workgroup.
fn reduce(l: Lane, v: f32, n: u32, take_max: bool) -> f32 {
  let t = l.t;
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

fn reduce_sum(l: Lane, v: f32, n: u32) -> f32 {
  return reduce(l, v, n, false);
}

fn reduce_max(l: Lane, v: f32, n: u32) -> f32 {
  return reduce(l, v, n, true);
}
