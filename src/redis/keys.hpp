// The key and channel names of one lock name, shared by the single-node and Cluster stores.
#pragma once

#include <dlock/redis/store.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

namespace dlock::redis::detail {

/// The parts one after the other, in one allocation (a chain of + makes a string per step).
inline std::string join(std::initializer_list<std::string_view> parts)
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
/// is computed once per `keys`.
class keys {
public:
    keys(const std::string& ns, const std::string& name)
        : prefix_(join({"{", slot_tag(key_slot(name)), "}", ns})), name_(name)
    {
    }

    /// The lock's hash: owner token, fencing token, ttl.
    std::string lock() const { return join({prefix_, ":lock:", name_}); }
    /// The fencing counter (one per slot tag and namespace).
    std::string fence() const { return join({prefix_, ":fence"}); }
    /// The channel a release is published on.
    std::string released() const { return join({prefix_, ":released:", name_}); }
    /// The queue of waiting tokens (direct hand-off).
    std::string queue() const { return join({prefix_, ":queue:", name_}); }
    /// The queued tokens' ttls (direct hand-off).
    std::string queue_ttl() const { return join({prefix_, ":queue-ttl:", name_}); }
    /// A read-write lock's or a semaphore's leases: token -> expiry (server ms).
    std::string holders() const { return join({prefix_, ":holders:", name_}); }
    /// Their fences, the permits, the writer (see src/redis/set_scripts.hpp).
    std::string info() const { return join({prefix_, ":info:", name_}); }
    /// Their waiters' queue and its ttls and kinds.
    std::string set_queue() const { return join({prefix_, ":squeue:", name_}); }
    std::string set_queue_ttl() const { return join({prefix_, ":squeue-ttl:", name_}); }
    /// The start of every waiter's grant channel; the token follows.
    std::string grant_prefix() const { return join({prefix_, ":granted:", name_, ":"}); }
    /// One waiter's grant channel.
    std::string grant(const std::string& token) const { return join({prefix_, ":granted:", name_, ":", token}); }

    /// A count-down latch's hash {count, done} (its release channel is released()).
    std::string latch() const { return join({prefix_, ":latch:", name_}); }
    /// The members that have counted the latch down.
    std::string latch_members() const { return join({prefix_, ":latch-members:", name_}); }

private:
    std::string prefix_;
    std::string name_;
};

}  // namespace dlock::redis::detail
