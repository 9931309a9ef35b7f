# SPDX-License-Identifier: BSL-1.0
# pkg-config modules for the installed libraries: dlock-core, one per backend (dlock-redis,
# dlock-etcd, ...) and dlock (everything built, as the target dlock::dlock). Each finds its
# prefix from its own place (${pcfiledir}), so an installed tree can move. The libraries a
# backend links privately (hiredis, libpq, ...) go in Libs.private when dlock is shared (only
# `pkg-config --static` needs them) and in Libs when it is static (every link needs them).

# The prefix relative to <prefix>/<libdir>/pkgconfig, e.g. ../.. or ../../.. (Debian's multiarch).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_dlock_pc_prefix "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _dlock_pc_up "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
  string(REGEX REPLACE "/$" "" _dlock_pc_up "${_dlock_pc_up}")
  set(_dlock_pc_prefix "\${pcfiledir}/${_dlock_pc_up}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_dlock_pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(_dlock_pc_includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_dlock_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  set(_dlock_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()

# dlock_pkgconfig(NAME DESCRIPTION REQUIRES CFLAGS LIBS PRIVATE_LIBS): writes <NAME>.pc and installs it.
function(dlock_pkgconfig name description requires cflags libs private_libs)
  set(public_libs "${libs}")
  set(libs_private "")
  if(BUILD_SHARED_LIBS)
    set(libs_private "${private_libs}")
  else()
    string(STRIP "${libs} ${private_libs}" public_libs)
  endif()
  set(text "# SPDX-License-Identifier: BSL-1.0\n")
  string(APPEND text "prefix=${_dlock_pc_prefix}\n")
  string(APPEND text "libdir=${_dlock_pc_libdir}\n")
  string(APPEND text "includedir=${_dlock_pc_includedir}\n\n")
  string(APPEND text "Name: ${name}\n")
  string(APPEND text "Description: ${description}\n")
  string(APPEND text "Version: ${PROJECT_VERSION}\n")
  if(requires)
    string(APPEND text "Requires: ${requires}\n")
  endif()
  string(APPEND text "Cflags: ${cflags}\n")
  if(public_libs)
    string(APPEND text "Libs: ${public_libs}\n")
  endif()
  if(libs_private)
    string(APPEND text "Libs.private: ${libs_private}\n")
  endif()
  file(WRITE "${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc" "${text}")
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

# C++20 and threads are part of the interface (the headers are coroutine code).
dlock_pkgconfig(dlock-core "dlock: distributed locks for C++20 coroutines on Boost.Asio (core, memory store)" ""
  "-I\${includedir} -std=c++20 -pthread" "-L\${libdir} -ldlock_core -pthread" "")
set(_dlock_pc_all dlock-core)
foreach(b IN LISTS DLOCK_BACKENDS)
  # What dlock_add_backend() recorded: the store's name, its DLOCK_HAS_* and its private libraries.
  get_target_property(what dlock_${b} DLOCK_WHAT)
  get_target_property(priv dlock_${b} DLOCK_PKG_CONFIG_LIBS)
  if(NOT priv)
    set(priv "")
  endif()
  list(JOIN priv " " priv)
  get_target_property(has dlock_${b} DLOCK_HAS_DEFINE)
  set(cflags "-I\${includedir}")
  if(has)
    string(APPEND cflags " -D${has}")
  endif()
  dlock_pkgconfig(dlock-${b} "dlock's ${what} store" "dlock-core = ${PROJECT_VERSION}" "${cflags}"
    "-L\${libdir} -ldlock_${b}" "${priv}")
  list(APPEND _dlock_pc_all dlock-${b})
endforeach()
list(JOIN _dlock_pc_all " " _dlock_pc_requires)
dlock_pkgconfig(dlock "dlock: distributed locks for C++20 coroutines on Boost.Asio (every store built)"
  "${_dlock_pc_requires}" "-I\${includedir}" "" "")
