// SPDX-License-Identifier: BSL-1.0
/// @file
/// DLOCK_API marks the public API: dlock's libraries are built with hidden symbols
/// (-fvisibility=hidden), so a shared libdlock_*.so exports only what carries this mark.
#pragma once

/// Exports a class or function from dlock's shared libraries (empty where that needs nothing).
#if defined(_WIN32) || defined(__CYGWIN__)
// Windows DLLs are not supported: dlock builds as static libraries there.
#define DLOCK_API
#elif defined(__GNUC__) || defined(__clang__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif
