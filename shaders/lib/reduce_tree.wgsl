// lib/reduce_tree.wgsl: how lib/reduce.wgsl reduces, a tree through workgroup memory; the
// subgroups lever composes levers/subgroups/lib/reduce_subgroups.wgsl in its place. An entry point
// that reduces takes a Lane, the builtins a reduction needs: only the local index here, the
// subgroup builtins too in the lever's.

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
