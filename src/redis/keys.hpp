// SPDX-License-Identifier: BSL-1.0
// The key and channel names of one lock name, shared by the single-node and Cluster stores.
#pragma once

#include <dlock/redis/store.hpp>

#include <array>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace dlock::redis::detail {

/// The parts of one key or channel name, joined when sent (see script_args::add).
using name_parts = std::array<std::string_view, 5>;

/// The parts one after the other, in one allocation (a chain of + makes a string per step).
inline std::string join(std::span<const std::string_view> parts)
{
    std::size_t n = 0;
    for (auto p : parts)
        n += p.size();
    std::string s;
    s.reserve(n);
    for (auto p : parts)
        s += p;
    return s;
}

/// Every name of a lock starts with "{tag}ns", where `tag` hashes to the lock name's own
/// slot: all of them land in one Cluster slot, so one script may touch them all. The slot
/// is computed once per `keys`, which refers to the name it was given (keep it alive).
class keys {
public:
    keys(const std::string& ns, const std::string& name) : prefix_(join_prefix(ns, name)), name_(name) {}
    keys(const std::string& ns, std::string&& name) = delete;  // it would refer to a temporary

    /// The lock's hash: owner token, fencing token, ttl.
    name_parts lock_parts() const { return {prefix_, ":lock:", name_}; }
    std::string lock() const { return join(lock_parts()); }
    /// The fencing counter (one per slot tag and namespace).
    name_parts fence_parts() const { return {prefix_, ":fence"}; }
    std::string fence() const { return join(fence_parts()); }
    /// The channel a release is published on.
    name_parts released_parts() const { return {prefix_, ":released:", name_}; }
    std::string released() const { return join(released_parts()); }
    /// The queue of waiting tokens (direct hand-off).
    name_parts queue_parts() const { return {prefix_, ":queue:", name_}; }
    std::string queue() const { return join(queue_parts()); }
    /// The queued tokens' ttls (direct hand-off).
    name_parts queue_ttl_parts() const { return {prefix_, ":queue-ttl:", name_}; }
    std::string queue_ttl() const { return join(queue_ttl_parts()); }
    /// A read-write lock's or a semaphore's leases: token -> expiry (server ms).
    std::string holders() const { return join({prefix_, ":holders:", name_}); }
    /// Their fences, the permits, the writer (see src/redis/set_scripts.hpp).
    std::string info() const { return join({prefix_, ":info:", name_}); }
    /// Their waiters' queue and its ttls and kinds.
    std::string set_queue() const { return join({prefix_, ":squeue:", name_}); }
    std::string set_queue_ttl() const { return join({prefix_, ":squeue-ttl:", name_}); }
    /// The start of every waiter's grant channel; the token follows.
    name_parts grant_prefix_parts() const { return {prefix_, ":granted:", name_, ":"}; }
    std::string grant_prefix() const { return join(grant_prefix_parts()); }
    /// One waiter's grant channel.
    std::string grant(const std::string& token) const { return join({prefix_, ":granted:", name_, ":", token}); }

    /// A key never written. Each Cluster script that deletes a key declares it, so that the
    /// script never runs while its slot migrates (the source answers TRYAGAIN or ASK, the
    /// target TRYAGAIN): Redis checks every command inside a script against the migration,
    /// and one refused part-way would leave the script half done.
    std::string migration_guard() const { return join({prefix_, ":migration-guard"}); }

    /// A count-down latch's hash {count, done} (its release channel is released()).
    std::string latch() const { return join({prefix_, ":latch:", name_}); }
    /// The members that have counted the latch down.
    std::string latch_members() const { return join({prefix_, ":latch-members:", name_}); }

private:
    static std::string join(std::initializer_list<std::string_view> parts)
    {
        return detail::join(std::span(parts.begin(), parts.size()));
    }
    static std::string join(const name_parts& parts) { return detail::join(parts); }
    static std::string join_prefix(const std::string& ns, std::string_view name)
    {
        return join({"{", slot_tag(key_slot(name)), "}", ns});
    }

    std::string prefix_;
    std::string_view name_;
};

}  // namespace dlock::redis::detail
