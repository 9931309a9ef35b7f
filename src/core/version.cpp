// SPDX-License-Identifier: BSL-1.0
#include <dlock/version.hpp>

namespace dlock {

// Compiled into the library, so a program loading another build of it sees that build's number.
version_info library_version() noexcept
{
    return version;
}

}  // namespace dlock
