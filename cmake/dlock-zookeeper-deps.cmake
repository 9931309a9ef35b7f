# SPDX-License-Identifier: BSL-1.0
# dlock::zookeeper's dependency: the ZooKeeper C client's single-threaded library (Debian:
# libzookeeper-st-dev) as the imported target dlock::zookeeper_c. Run by dlock_add_backend()
# and by the installed dlock-config.cmake. Appends what is missing to _dlock_missing.
if(NOT TARGET dlock::zookeeper_c)
  find_path(DLOCK_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
  find_library(DLOCK_ZOOKEEPER_LIBRARY zookeeper_st)
  if(DLOCK_ZOOKEEPER_INCLUDE_DIR AND DLOCK_ZOOKEEPER_LIBRARY)
    add_library(dlock::zookeeper_c UNKNOWN IMPORTED)
    set_target_properties(dlock::zookeeper_c PROPERTIES
      IMPORTED_LOCATION "${DLOCK_ZOOKEEPER_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_ZOOKEEPER_INCLUDE_DIR}")
  else()
    list(APPEND _dlock_missing "the ZooKeeper C client (Debian: libzookeeper-st-dev)")
  endif()
endif()
