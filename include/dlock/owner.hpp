// SPDX-License-Identifier: BSL-1.0
/// @file
/// Who holds a lock: coroutines have no thread identity, so re-entry is by explicit owner.
#pragma once

#include <dlock/export.hpp>

#include <cstdint>

namespace dlock {

/// An identity for re-entrant acquisition. Each default-constructed owner is new and
/// unique in the process; copies are the same owner. Acquiring a lock with an owner that
/// already holds it adds a hold instead of waiting (the store lease is released with the
/// last hold). Pass the owner (or a guard, whose owner() it is) down to nested code.
/// @threadsafety A value; new owners may be made on any thread (the counter is atomic).
class DLOCK_API owner {
public:
    /// A new owner, distinct from every other in this process.
    owner() noexcept;
    /// Process-unique identity (part of the store's lease token).
    std::uint64_t id() const noexcept { return id_; }
    /// The same owner: one was copied from the other.
    friend bool operator==(const owner&, const owner&) = default;

private:
    friend class lock;
    friend class guard;
    explicit owner(std::uint64_t id) noexcept : id_(id) {}
    std::uint64_t id_;
};

}  // namespace dlock
