# SPDX-License-Identifier: BSL-1.0
# The API reference: `cmake --build build --target docs` runs doxygen over include/dlock into
# build/docs/html (undocumented public API is a warning there). With the tests on, the
# api_docs test runs it too and fails on any warning, or when doxygen is missing: the test
# run must check the docs, not skip them (scripts/setup.sh --tests installs doxygen).
find_package(Doxygen QUIET)
set(DLOCK_DOCS_DIR ${PROJECT_BINARY_DIR}/docs)
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
if(DOXYGEN_FOUND)
  add_custom_target(docs
    COMMAND Doxygen::doxygen ${PROJECT_BINARY_DIR}/Doxyfile
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    COMMENT "API reference into ${DLOCK_DOCS_DIR}/html"
    VERBATIM)
else()
  message(STATUS "dlock: doxygen not found: no docs target (Debian: apt-get install doxygen)")
endif()
if(DLOCK_BUILD_TESTS)
  add_test(NAME api_docs COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/api_docs.sh "${DOXYGEN_EXECUTABLE}"
    ${PROJECT_BINARY_DIR}/Doxyfile ${PROJECT_BINARY_DIR}/api_docs_test)
  set_tests_properties(api_docs PROPERTIES TIMEOUT 300)
endif()
