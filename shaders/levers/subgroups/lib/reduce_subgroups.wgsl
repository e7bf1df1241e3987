// levers/subgroups/lib/reduce_subgroups.wgsl: lib/reduce.wgsl's sum or max over a workgroup through
// subgroup operations, #replace'd for lib/reduce_tree.wgsl under the plain entry points. Two
// steps and two barriers instead of log2(n) + 2: each subgroup reduces its own invocations, then
// every subgroup reduces the subgroups' partials, so each invocation gets the total without a
// third barrier.
//
// Nothing here assumes a subgroup size or which invocations share a subgroup: a partial is stored
// at its subgroup_id, the partials are read back num_subgroups of them, subgroup_size at a time
// (any size from 4 to 128, any number of subgroups up to 64 in 256 invocations). The order is
// fixed for a device (its subgroup operations and its mapping of invocations to subgroups), so a
// run repeats bit for bit; another device may round differently, which the gate measures.

enable subgroups;
requires subgroup_id;

struct Lane {
  @builtin(local_invocation_index) t: u32,
  @builtin(subgroup_invocation_id) lane: u32,
  @builtin(subgroup_size) size: u32,
  @builtin(subgroup_id) id: u32,
  @builtin(num_subgroups) count: u32,
}

// The subgroups' partials in 0 .. num_subgroups-1; the rest is for the kernels that use it as
// lib/reduce_tree.wgsl's (layernorm_backward_params).
var<workgroup> scratch: array<f32, 256>;

fn over_subgroup(v: f32, take_max: bool) -> f32 {
  if (take_max) { return subgroupMax(v); }
  return subgroupAdd(v);
}

// Over invocations 0 .. n-1 (the others add nothing), n the same in the whole workgroup.
fn reduce(l: Lane, v: f32, n: u32, take_max: bool) -> f32 {
  let nothing = select(0.0, -0x1.fffffep+127f, take_max); // the lowest f32 for a max
  let own = over_subgroup(select(nothing, v, l.t < n), take_max);
  if (subgroupElect()) { scratch[l.id] = own; }
  workgroupBarrier();
  var part = nothing;
  for (var i = l.lane; i < l.count; i += l.size) {
    part = select(part + scratch[i], max(part, scratch[i]), take_max);
  }
  let total = over_subgroup(part, take_max);
  workgroupBarrier();
  return total;
}
