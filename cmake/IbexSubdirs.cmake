# Adds every immediate sub-folder that has a CMakeLists.txt, so a new tool or test folder
# needs no edit of its parent. EXCEPT names folders the caller adds itself.
function(ibex_add_child_dirs)
  cmake_parse_arguments(A "" "" "EXCEPT" ${ARGN})
  file(GLOB _children LIST_DIRECTORIES true RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT _children)
  foreach(_c IN LISTS _children)
    if(NOT _c IN_LIST A_EXCEPT AND IS_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${_c} AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${_c}/CMakeLists.txt)
      add_subdirectory(${_c})
    endif()
  endforeach()
endfunction()
