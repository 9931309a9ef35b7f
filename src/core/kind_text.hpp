// SPDX-License-Identifier: BSL-1.0
// The text of error::kind_mismatch naming what the name is in use as: every store that
// serves several kinds keeps it as its last_error_text(), so that a user (the tool) is told
// which primitive to ask for.
#pragma once

#include <dlock/store.hpp>

#include <string>

namespace dlock::detail {

/// "dlock: the name is in use as a read-write lock"; `kind` mutex, read (or write) or
/// permit, with a semaphore's `permits`.
inline std::string kind_in_use_text(lease_kind kind, unsigned long long permits = 0)
{
    std::string s = "dlock: the name is in use as ";
    switch (kind) {
    case lease_kind::mutex: return s + "a mutex";
    case lease_kind::permit: return s + "a semaphore of " + std::to_string(permits) + " permits";
    case lease_kind::leader: return s + "an election";
    default: return s + "a read-write lock";
    }
}

}  // namespace dlock::detail
