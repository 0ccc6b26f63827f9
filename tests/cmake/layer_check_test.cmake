# The layer rule as the build enforces it: a throwaway project that includes the real
# cmake/IbexLayers.cmake is built twice, once with a transport source that includes
# allreduce/comm.h (the build must fail and name the rule), once without it (the build must
# pass). Then the real tree must pass the same check.
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -P layer_check_test.cmake
cmake_minimum_required(VERSION 3.25)
foreach(_v SOURCE_DIR WORK_DIR)
  if(NOT ${_v})
    message(FATAL_ERROR "layer_check_test: ${_v} is not set")
  endif()
endforeach()

set(_probe ${WORK_DIR}/probe)
file(REMOVE_RECURSE ${_probe})
file(MAKE_DIRECTORY ${_probe}/cmake ${_probe}/transport/soft ${_probe}/allreduce ${_probe}/runtime/base)
foreach(_f IbexLayers.cmake IbexLayerRules.cmake IbexLayerCheck.cmake)
  file(COPY ${SOURCE_DIR}/cmake/${_f} DESTINATION ${_probe}/cmake)
endforeach()
file(WRITE ${_probe}/CMakeLists.txt
  "cmake_minimum_required(VERSION 3.25)\nproject(layer_probe LANGUAGES NONE)\n"
  "include(cmake/IbexLayers.cmake)\nibex_add_layer_check()\n")
file(WRITE ${_probe}/allreduce/comm.h "#pragma once\n")
file(WRITE ${_probe}/runtime/base/status.h "#pragma once\n")
file(WRITE ${_probe}/transport/soft/upward.cpp
  "#include \"runtime/base/status.h\"\n#include \"allreduce/comm.h\"\n")

function(build_probe out_rc out_text)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${_probe} -B ${_probe}/build
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "layer_check_test: the probe project did not configure:\n${_out}${_err}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${_probe}/build
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  set(${out_rc} ${_rc} PARENT_SCOPE)
  set(${out_text} "${_out}${_err}" PARENT_SCOPE)
endfunction()

build_probe(_rc _text)
if(_rc EQUAL 0)
  message(FATAL_ERROR "layer_check_test: an upward include (transport -> allreduce) built:\n${_text}")
endif()
if(NOT _text MATCHES "transport/soft/upward.cpp: #include \"allreduce/comm.h\" -- rule 'ibex_transport may use only ibex_base, ibex_congestion': allreduce/comm.h is in ibex_coll")
  message(FATAL_ERROR "layer_check_test: the build failed without naming the rule:\n${_text}")
endif()
message(STATUS "upward include refused, rule named")

file(WRITE ${_probe}/transport/soft/upward.cpp "#include \"runtime/base/status.h\"\n")
build_probe(_rc _text)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "layer_check_test: a downward include failed the build:\n${_text}")
endif()
message(STATUS "downward include accepted")

execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${SOURCE_DIR} -P ${SOURCE_DIR}/cmake/IbexLayerCheck.cmake
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "layer_check_test: the source tree breaks the layering:\n${_out}${_err}")
endif()
message(STATUS "source tree keeps the layering")
file(REMOVE_RECURSE ${_probe})
