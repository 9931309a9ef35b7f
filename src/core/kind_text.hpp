// SPDX-License-Identifier: BSL-1.0
// The text of error::kind_mismatch naming what the name is in use as: every store that
// serves several kinds keeps it as its last_error_text(), so that a user (the tool) is told
// which primitive to ask for.
#pragma once

#include <dlock/store.hpp>

#include <string>

namespace dlock::detail {

/// "a mutex", "a read-write lock", "a semaphore of N permits" (`permits`), "an election".
inline std::string kind_name(lease_kind kind, unsigned long long permits = 0)
{
    switch (kind) {
    case lease_kind::mutex: return "a mutex";
    case lease_kind::permit: return "a semaphore of " + std::to_string(permits) + " permits";
    case lease_kind::leader: return "an election";
    default: return "a read-write lock";
    }
}

/// "dlock: the name is in use as a read-write lock"; `kind` mutex, read (or write) or
/// permit, with a semaphore's `permits`.
inline std::string kind_in_use_text(lease_kind kind, unsigned long long permits = 0)
{
    return "dlock: the name is in use as " + kind_name(kind, permits);
}

/// kind_name() of the SQL stores' code for what holds a name: -1 a mutex, 0 a read-write
/// lock, N a semaphore of N permits.
inline std::string kind_name_of_code(long long what)
{
    return what < 0
               ? kind_name(lease_kind::mutex)
               : kind_name(what == 0 ? lease_kind::read : lease_kind::permit, static_cast<unsigned long long>(what));
}

/// A read-write lock's or a semaphore's kind as the stores' set recipes spell it.
inline char set_kind_letter(lease_kind k) noexcept
{
    return k == lease_kind::read ? 'r' : k == lease_kind::write ? 'w' : 'p';
}

/// What a set's release frees, as the stores' set recipes spell it: '0' the caller's own
/// lease; forced (the operator's override): 'r' every reader, 'w' the writer, '1' every lease.
inline char force_letter(lease_kind side) noexcept
{
    return side == lease_kind::read ? 'r' : side == lease_kind::write ? 'w' : '1';
}

/// A forced release of one side of a read-write lock only (lease_kind read or write).
inline bool one_side(lease_kind side) noexcept
{
    return side == lease_kind::read || side == lease_kind::write;
}

}  // namespace dlock::detail
