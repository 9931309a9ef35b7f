# SPDX-License-Identifier: BSL-1.0

include(CMakePackageConfigHelpers)

set(dlock_installed_targets dlock_core dlock)
foreach(b IN LISTS DLOCK_BACKENDS)
  list(APPEND dlock_installed_targets dlock_${b})
endforeach()
install(TARGETS ${dlock_installed_targets} EXPORT dlock-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT dlock-targets NAMESPACE dlock:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
string(REPLACE ";" " " DLOCK_BACKENDS_LIST "${DLOCK_BACKENDS}")
configure_package_config_file(cmake/dlock-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/dlock-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dlock-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dlock-config.cmake ${CMAKE_CURRENT_BINARY_DIR}/dlock-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
# Each built backend's dependency finder, re-run by dlock-config.cmake.
foreach(b IN LISTS DLOCK_BACKENDS)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/dlock-${b}-deps.cmake)
    install(FILES ${CMAKE_CURRENT_LIST_DIR}/dlock-${b}-deps.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/pkgconfig.cmake)
