# SPDX-License-Identifier: BSL-1.0
# dlock_add_backend(<store> DOC <option text> WHAT <store's name for people>
#                   SOURCES <src/...> [PUBLIC <libs>] [PRIVATE <libs>] [PKG_CONFIG_LIBS <-l...>]
#                   [IF_MISSING FATAL_ERROR] [NO_HAS_DEFINE])
# One store backend: the option DLOCK_WITH_<STORE> (ON), then, only if it is on, its
# dependencies (cmake/dlock-<store>-deps.cmake, also run by the installed package config),
# then the library dlock_<store> (alias dlock::<store>) on dlock_core, defining
# DLOCK_HAS_<STORE> for its users (NO_HAS_DEFINE: not, for Redis, which all code that could ask
# needs anyway). A dependency missing turns the backend off with a warning
# (IF_MISSING FATAL_ERROR: stops the configure). Appends <store> to DLOCK_BACKENDS.
function(dlock_add_backend store)
  cmake_parse_arguments(PARSE_ARGV 1 arg "NO_HAS_DEFINE" "DOC;WHAT;IF_MISSING" "SOURCES;PUBLIC;PRIVATE;PKG_CONFIG_LIBS")
  string(TOUPPER "${store}" upper)
  option(DLOCK_WITH_${upper} "${arg_DOC}" ON)
  if(NOT DLOCK_WITH_${upper})
    return()
  endif()
  # Sets _dlock_missing to what is not there; defines the imported targets of what is.
  set(_dlock_missing "")
  include("${PROJECT_SOURCE_DIR}/cmake/dlock-${store}-deps.cmake" OPTIONAL)
  if(_dlock_missing)
    set(mode WARNING)
    if(arg_IF_MISSING)
      set(mode ${arg_IF_MISSING})
    endif()
    message(${mode} "dlock: ${_dlock_missing} missing: building without dlock::${store} (or -DDLOCK_WITH_${upper}=OFF)")
    set(DLOCK_WITH_${upper} OFF PARENT_SCOPE)
    return()
  endif()

  set(lib dlock_${store})
  set(has "")
  if(NOT arg_NO_HAS_DEFINE)
    set(has "DLOCK_HAS_${upper}=1")
  endif()
  add_library(${lib} ${arg_SOURCES})
  add_library(dlock::${store} ALIAS ${lib})
  target_include_directories(${lib} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${lib} PUBLIC dlock_core ${arg_PUBLIC} PRIVATE ${arg_PRIVATE} $<BUILD_INTERFACE:dlock_options>)
  # Code that can do without this store (the tool) asks for it with #ifdef DLOCK_HAS_<STORE>.
  target_compile_definitions(${lib} INTERFACE ${has})
  # Versioned (libdlock_<store>.so.0.1 in a shared build), exporting only what include/dlock marks DLOCK_API.
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${store}
    VERSION ${PROJECT_VERSION} SOVERSION ${DLOCK_SOVERSION}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    DLOCK_WHAT "${arg_WHAT}" DLOCK_PKG_CONFIG_LIBS "${arg_PKG_CONFIG_LIBS}" DLOCK_HAS_DEFINE "${has}")
  if(BUILD_SHARED_LIBS)
    # The backends' uses of core internals (detail::parse_duration, the kit's machines; hidden in
    # libdlock_core): each shared backend keeps its own copy instead of widening the core's
    # exported API.
    target_sources(${lib} PRIVATE ${PROJECT_SOURCE_DIR}/src/core/duration.cpp
      ${PROJECT_SOURCE_DIR}/src/common/request_pipe.cpp
      ${PROJECT_SOURCE_DIR}/src/common/predecessor_wait.cpp)
  endif()
  set(DLOCK_BACKENDS ${DLOCK_BACKENDS} ${store} PARENT_SCOPE)
endfunction()
