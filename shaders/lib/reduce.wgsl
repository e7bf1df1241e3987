// lib/reduce.wgsl: the sum or the max of one value per invocation over a workgroup, in a fixed
// order (deterministic), by lib/reduce_tree.wgsl (or what a lever #replaces it with). Every
// invocation gets the result, and the closing barrier frees scratch for the next call.

#include "lib/reduce_tree.wgsl"

fn reduce_sum(l: Lane, v: f32, n: u32) -> f32 {
  return reduce(l, v, n, false);
}

fn reduce_max(l: Lane, v: f32, n: u32) -> f32 {
  return reduce(l, v, n, true);
}
