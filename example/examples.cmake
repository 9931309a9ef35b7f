# The user-facing examples. They link dlock only (never the test helpers): they are what
# users copy. test/examples runs each of them against a throwaway redis-server.
foreach(example quickstart leader_election http_endpoint fencing)
  add_executable(${example} ${CMAKE_CURRENT_LIST_DIR}/${example}.cpp)
  target_link_libraries(${example} PRIVATE dlock::dlock $<BUILD_INTERFACE:dlock_options>)
  # g++ 12 misreads Asio's awaitable frame allocator as a new/delete mismatch (a known
  # false positive with coroutines).
  target_compile_options(${example} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-mismatched-new-delete>)
endforeach()
