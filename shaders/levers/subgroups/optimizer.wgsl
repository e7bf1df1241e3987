// levers/subgroups/optimizer.wgsl: optimizer.wgsl with its workgroup reductions in subgroup operations
// (levers/subgroups/lib/reduce.wgsl); entry points, bindings and params are the plain module's.

#replace "lib/reduce.wgsl" with "levers/subgroups/lib/reduce.wgsl"
#include "optimizer.wgsl"
