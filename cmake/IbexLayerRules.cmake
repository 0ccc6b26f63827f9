# The layers of libibex, bottom up, and what each may use. One table, read both by the
# build (cmake/IbexLayers.cmake: one target per layer, linked to what it may use) and by
# the include check (cmake/IbexLayerCheck.cmake), so the two cannot drift apart.
#
#   IBEX_LAYERS                 the layers, bottom first
#   IBEX_LAYER_<name>_DIRS      source folders (repository-relative) that belong to it;
#                               the longest matching folder wins (runtime/base is not
#                               runtime)
#   IBEX_LAYER_<name>_USES      layers it may include from and link, besides itself
#
# The public C headers (runtime/include/ibex, included as <ibex/...>) are the contract
# every layer implements or calls, so any layer may include them.

set(IBEX_LAYERS ibex_base ibex_congestion ibex_transport ibex_api ibex_coll)

set(IBEX_LAYER_ibex_base_DIRS runtime/base)
set(IBEX_LAYER_ibex_base_USES)

set(IBEX_LAYER_ibex_congestion_DIRS congestion)
set(IBEX_LAYER_ibex_congestion_USES ibex_base)

set(IBEX_LAYER_ibex_transport_DIRS transport)
set(IBEX_LAYER_ibex_transport_USES ibex_base ibex_congestion)

set(IBEX_LAYER_ibex_api_DIRS runtime)
set(IBEX_LAYER_ibex_api_USES ibex_base ibex_congestion ibex_transport)

# Collectives reach QPs through the public API only: the api layer's bootstrap and
# topology, never a provider's internals.
set(IBEX_LAYER_ibex_coll_DIRS allreduce)
set(IBEX_LAYER_ibex_coll_USES ibex_base ibex_api)

# Folders above every layer (programs, tests, benchmarks, bindings) may include anything;
# nothing in a layer may include them.
set(IBEX_ABOVE_LAYERS_DIRS tools tests bench python plugins)

# The glob patterns of every layer's sources below `root`.
function(ibex_layer_source_globs root out)
  set(_globs)
  foreach(_layer IN LISTS IBEX_LAYERS)
    foreach(_dir IN LISTS IBEX_LAYER_${_layer}_DIRS)
      foreach(_ext h hpp c cc cpp cu cuh)
        list(APPEND _globs "${root}/${_dir}/*.${_ext}")
      endforeach()
    endforeach()
  endforeach()
  set(${out} ${_globs} PARENT_SCOPE)
endfunction()
