// levers/subgroups/layernorm.wgsl: layernorm.wgsl with its workgroup reductions in subgroup
// operations (levers/subgroups/lib/reduce_subgroups.wgsl); the entry points, bindings and params
// are the plain module's.

#replace "lib/reduce_tree.wgsl" with "levers/subgroups/lib/reduce_subgroups.wgsl"
#include "layernorm.wgsl"
