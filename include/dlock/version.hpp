// SPDX-License-Identifier: BSL-1.0
/// @file
/// dlock's version: the one in CMakeLists.txt's project() (CMake refuses to configure when the
/// two disagree), as macros for the preprocessor and constants a program can compare with
/// library_version(), the version of the library it was linked or loaded with.
#pragma once

#include <dlock/export.hpp>

/// The major release: a new one may break the API (CHANGELOG.md).
#define DLOCK_VERSION_MAJOR 0
/// The minor release (before 1.0 it may break the API too).
#define DLOCK_VERSION_MINOR 1
/// The patch release: fixes only.
#define DLOCK_VERSION_PATCH 0
/// "major.minor.patch".
#define DLOCK_VERSION_STRING "0.1.0"
/// One number that grows with every release, for `#if`: major * 10000 + minor * 100 + patch.
#define DLOCK_VERSION (DLOCK_VERSION_MAJOR * 10000 + DLOCK_VERSION_MINOR * 100 + DLOCK_VERSION_PATCH)

namespace dlock {

/// A release's number (semantic versioning: see CHANGELOG.md for what counts as breaking).
struct version_info {
    unsigned major = 0;       ///< DLOCK_VERSION_MAJOR of that release
    unsigned minor = 0;       ///< DLOCK_VERSION_MINOR of that release
    unsigned patch = 0;       ///< DLOCK_VERSION_PATCH of that release
    const char* string = "";  ///< "major.minor.patch"

    /// A library of version `lib` can serve a program compiled against *this: the same major
    /// release and at least this one's minor (before 1.0, the same minor: 0.x minors may break).
    constexpr bool compatible_with(const version_info& lib) const noexcept
    {
        if (lib.major != major)
            return false;
        return major == 0 ? lib.minor == minor && lib.patch >= patch
                          : lib.minor > minor || (lib.minor == minor && lib.patch >= patch);
    }
};

/// The version of the headers this translation unit was compiled against.
inline constexpr version_info version{DLOCK_VERSION_MAJOR, DLOCK_VERSION_MINOR, DLOCK_VERSION_PATCH,
                                      DLOCK_VERSION_STRING};

/// The version of the dlock library linked into (or loaded by) the program: with a shared
/// library it can differ from `version`. Check at start-up:
/// @code
/// if (!dlock::version.compatible_with(dlock::library_version())) ...
/// @endcode
/// @threadsafety Any thread.
DLOCK_API version_info library_version() noexcept;

}  // namespace dlock
