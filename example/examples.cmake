# SPDX-License-Identifier: BSL-1.0
# The user-facing examples. They link dlock only (never the test helpers): they are what
# users copy. test/examples runs each of them against a throwaway server (lock_any_store:
# one of each store).
foreach(example quickstart leader_election http_endpoint fencing
                lock_any_store read_write_lock semaphore latch election threads)
  add_executable(${example} ${CMAKE_CURRENT_LIST_DIR}/${example}.cpp)
  target_link_libraries(${example} PRIVATE dlock::dlock $<BUILD_INTERFACE:dlock_options>)
endforeach()
