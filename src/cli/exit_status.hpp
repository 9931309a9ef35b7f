// SPDX-License-Identifier: BSL-1.0
// The dlock tool's documented exit statuses (README "Command-line tool").
#pragma once

namespace dlock::cli {

/// `dlock run` exits with its command's own status (128 + N if a signal N ended it) unless
/// one of these applies. They follow sysexits.h and timeout(1) where those have a meaning.
namespace exit_status {
inline constexpr int ok = 0;
inline constexpr int usage = 2;             ///< bad flag, duration, URL or config file
inline constexpr int kind_mismatch = 65;    ///< NAME is in use as another primitive: other flags (EX_DATAERR)
inline constexpr int unavailable = 69;      ///< server unreachable, wrong password, store error
inline constexpr int conflict = 75;         ///< lock not had within --wait (see --conflict-exit-code)
inline constexpr int lease_lost = 76;       ///< the lease was lost; the command was terminated
inline constexpr int internal = 70;         ///< a bug in dlock (EX_SOFTWARE)
inline constexpr int cannot_execute = 126;  ///< the command exists but could not be executed
inline constexpr int not_found = 127;       ///< the command was not found
}  // namespace exit_status

}  // namespace dlock::cli
