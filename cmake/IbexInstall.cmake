include(CMakePackageConfigHelpers)
install(TARGETS ibex EXPORT ibexTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY runtime/include/ibex DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ibexTargets NAMESPACE ibex:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibex)
configure_package_config_file(cmake/ibexConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ibexConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibex)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ibexConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ibexConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/ibexConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibex)
file(RELATIVE_PATH IBEX_PC_PREFIX_REL "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(cmake/ibex.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ibex.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ibex.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
