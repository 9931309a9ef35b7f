# SPDX-License-Identifier: BSL-1.0
# dlock::postgres's dependency: libpq (Debian: libpq-dev), through CMake's FindPostgreSQL or
# else pkg-config, as the imported target dlock::libpq either way (so the exported link
# interface is the same on every machine). Run by dlock_add_backend() and by the installed
# dlock-config.cmake. Appends what is missing to _dlock_missing.
if(NOT TARGET dlock::libpq)
  find_package(PostgreSQL QUIET)
  if(PostgreSQL_FOUND)
    add_library(dlock::libpq INTERFACE IMPORTED)
    set_target_properties(dlock::libpq PROPERTIES INTERFACE_LINK_LIBRARIES PostgreSQL::PostgreSQL)
  else()
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
      pkg_check_modules(DLOCK_LIBPQ QUIET IMPORTED_TARGET libpq)
    endif()
    if(DLOCK_LIBPQ_FOUND)
      add_library(dlock::libpq INTERFACE IMPORTED)
      set_target_properties(dlock::libpq PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::DLOCK_LIBPQ)
    else()
      list(APPEND _dlock_missing "libpq (Debian: libpq-dev)")
    endif()
  endif()
endif()
