# SPDX-License-Identifier: BSL-1.0
# dlock::etcd's dependencies: Boost.JSON (Beast is headers). Run by dlock_add_backend() and by
# the installed dlock-config.cmake. Appends what is missing to _dlock_missing.
find_package(Boost 1.81 CONFIG QUIET COMPONENTS json)
if(NOT Boost_FOUND)
  list(APPEND _dlock_missing "Boost.JSON (Debian: libboost-json1.81-dev)")
endif()
