// SPDX-License-Identifier: BSL-1.0
#include <dlock/version.hpp>

namespace dlock {

// The compatibility rule of CHANGELOG.md: same major, a newer library within it; before 1.0 the
// same minor.
static_assert(version_info{1, 2, 0, ""}.compatible_with({1, 3, 1, ""}));
static_assert(version_info{1, 2, 5, ""}.compatible_with({1, 2, 5, ""}));
static_assert(!version_info{1, 3, 0, ""}.compatible_with({1, 2, 9, ""}));
static_assert(!version_info{1, 2, 0, ""}.compatible_with({2, 0, 0, ""}));
static_assert(version_info{0, 1, 0, ""}.compatible_with({0, 1, 3, ""}));
static_assert(!version_info{0, 1, 0, ""}.compatible_with({0, 2, 0, ""}));
static_assert(!version_info{0, 1, 2, ""}.compatible_with({0, 1, 1, ""}));

// Compiled into the library, so a program loading another build of it sees that build's number.
version_info library_version() noexcept
{
    return version;
}

}  // namespace dlock
