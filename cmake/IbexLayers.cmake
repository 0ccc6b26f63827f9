# One build target per layer of libibex (the table is IbexLayerRules.cmake).
#
# Each layer is an OBJECT library: it compiles its folders' sources once and carries the
# usage requirements (system libraries, definitions) of what it may use. libibex.so and
# the static archive that tests and tools link are made of the layers' objects. Two checks
# keep the layering honest, both in the default build:
#   - ibex_layer_check runs IbexLayerCheck.cmake before any layer compiles: an include from
#     a layer that is not declared fails the build with the rule's name;
#   - ibex_<layer>_link links each layer with only the layers it declares, with
#     --no-undefined: a call into an undeclared layer fails the link.
include(${CMAKE_CURRENT_LIST_DIR}/IbexLayerRules.cmake)

# ibex_add_layer_check(): the include check as a build step over the layers' sources.
function(ibex_add_layer_check)
  ibex_layer_source_globs("${PROJECT_SOURCE_DIR}" _globs)
  file(GLOB_RECURSE _sources CONFIGURE_DEPENDS ${_globs})
  set(_stamp ${PROJECT_BINARY_DIR}/ibex_layer_check.stamp)
  add_custom_command(OUTPUT ${_stamp}
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DSTAMP=${_stamp}
            -P ${PROJECT_SOURCE_DIR}/cmake/IbexLayerCheck.cmake
    DEPENDS ${_sources} ${PROJECT_SOURCE_DIR}/cmake/IbexLayerCheck.cmake
            ${PROJECT_SOURCE_DIR}/cmake/IbexLayerRules.cmake
    COMMENT "Checking the layers' includes (cmake/IbexLayerRules.cmake)"
    VERBATIM)
  add_custom_target(ibex_layer_check ALL DEPENDS ${_stamp})
endfunction()

# ibex_add_layer(<name>): the layer's object library, linked to the layers it may use.
# Its folders then add sources with target_sources(<name> PRIVATE ...).
function(ibex_add_layer name)
  if(NOT name IN_LIST IBEX_LAYERS)
    message(FATAL_ERROR "ibex_add_layer: ${name} is not in IBEX_LAYERS (cmake/IbexLayerRules.cmake)")
  endif()
  add_library(${name} OBJECT)
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_compile_definitions(${name} PRIVATE IBEX_BUILDING_LIBRARY=1)
  target_link_libraries(${name} PUBLIC Threads::Threads ${IBEX_LAYER_${name}_USES})
  if(TARGET ibex_layer_check)
    add_dependencies(${name} ibex_layer_check)
  endif()
endfunction()

# The layers a layer may use, all the way down (itself first).
function(ibex_layer_closure name out)
  set(_seen ${name})
  set(_todo ${IBEX_LAYER_${name}_USES})
  while(_todo)
    list(POP_FRONT _todo _l)
    if(NOT _l IN_LIST _seen)
      list(APPEND _seen ${_l})
      list(APPEND _todo ${IBEX_LAYER_${_l}_USES})
    endif()
  endwhile()
  set(${out} ${_seen} PARENT_SCOPE)
endfunction()

# ibex_add_layer_link_checks(): per layer, a shared object of its objects and those of
# the layers it may use, linked with --no-undefined. Nothing installs or loads them.
function(ibex_add_layer_link_checks)
  foreach(_layer IN LISTS IBEX_LAYERS)
    ibex_layer_closure(${_layer} _closure)
    set(_objs)
    foreach(_l IN LISTS _closure)
      list(APPEND _objs $<TARGET_OBJECTS:${_l}>)
    endforeach()
    add_library(${_layer}_link SHARED ${_objs})
    target_link_libraries(${_layer}_link PRIVATE ${_layer})
    target_link_options(${_layer}_link PRIVATE -Wl,--no-undefined)
    set_target_properties(${_layer}_link PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/layer_link_check)
  endforeach()
endfunction()
