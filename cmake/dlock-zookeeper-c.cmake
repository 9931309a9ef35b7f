# SPDX-License-Identifier: BSL-1.0
# Finds the ZooKeeper C client's single-threaded library (Debian: libzookeeper-st-dev) and
# defines the imported target dlock::zookeeper_c. Shared by the build and the installed config.
if(NOT TARGET dlock::zookeeper_c)
  find_path(DLOCK_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
  find_library(DLOCK_ZOOKEEPER_LIBRARY zookeeper_st)
  if(DLOCK_ZOOKEEPER_INCLUDE_DIR AND DLOCK_ZOOKEEPER_LIBRARY)
    add_library(dlock::zookeeper_c UNKNOWN IMPORTED)
    set_target_properties(dlock::zookeeper_c PROPERTIES
      IMPORTED_LOCATION "${DLOCK_ZOOKEEPER_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_ZOOKEEPER_INCLUDE_DIR}")
  endif()
endif()
