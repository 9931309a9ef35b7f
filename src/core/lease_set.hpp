// SPDX-License-Identifier: BSL-1.0
// The protocol of read-write locks and semaphores, sans-io: a set of leases on one name
// (readers and a writer, or permits) with a FIFO queue of waiters. memory_store runs it as
// is; the Redis scripts (src/redis/set_scripts.hpp) follow it step by step, and so should
// any other store that serves these kinds.
#pragma once

#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>

namespace dlock::detail {

class lease_set {
public:
    using time_point = std::chrono::steady_clock::time_point;
    using milliseconds = std::chrono::milliseconds;
    /// Whether a queued token's process still waits (a Redis grant subscription, a watcher).
    using live_fn = std::function<bool(const std::string& token)>;
    /// A queued waiter was granted a lease: tell it (the grant channel).
    using grant_fn = std::function<void(const std::string& token, const grant_notice&)>;

    /// The set's kind: read (a read-write lock) or permit (a semaphore of `capacity`).
    lease_set(lease_kind first, unsigned capacity);

    /// kind_mismatch if `req` is another primitive, or a semaphore of another size.
    boost::system::error_code check(const lease_request& req) const;
    /// Ours already: refreshed. Else the queue is served first (dead waiters dropped, the
    /// head granted while the set admits it), then the request taken if nobody is queued
    /// and the set admits it; else refused (queued at the back if asked).
    acquire_result acquire(const lease_request& req, time_point now, std::uint64_t& fence, const live_fn& live,
                           const grant_fn& grant);
    /// Extends our lease; contended if anyone is queued or was refused within `ttl`.
    renew_result renew(const std::string& token, milliseconds ttl, time_point now);
    /// Frees our lease and serves the queue; a token that does not hold is withdrawn.
    /// `wake`: nobody is left queued, so waiters that did not queue should retry.
    bool release(const std::string& token, time_point now, std::uint64_t& fence, const live_fn& live,
                 const grant_fn& grant, bool& wake);
    /// Frees every lease of `side` (read: every reader, write: the writer; any other kind:
    /// every lease), the operator's override, and serves the queue; true if any was held.
    bool force_release(lease_kind side, time_point now, std::uint64_t& fence, const live_fn& live,
                       const grant_fn& grant);
    lock_status status(time_point now);
    /// Nothing held, nobody queued: the set may be forgotten.
    bool empty(time_point now);
    std::size_t queued() const noexcept { return queue_.size(); }
    /// read (a read-write lock) or permit (a semaphore of capacity() permits).
    lease_kind kind() const noexcept { return what_; }
    unsigned capacity() const noexcept { return capacity_; }

private:
    struct holder {
        std::uint64_t fence;
        time_point expires;
        lease_kind kind;
    };
    struct waiter {
        std::string token;
        milliseconds ttl;
        lease_kind kind;
    };
    void purge(time_point now);
    bool admits(lease_kind k) const;
    bool has_writer() const;
    std::uint64_t take(const std::string& token, lease_kind k, milliseconds ttl, time_point now, std::uint64_t& fence);
    // Grants the queue's head while admitted; returns the fence if `me` was among them.
    std::uint64_t serve(const std::string& me, time_point now, std::uint64_t& fence, const live_fn& live,
                        const grant_fn& grant);

    lease_kind what_;
    unsigned capacity_;
    std::map<std::string, holder> holders_;
    std::deque<waiter> queue_;
    time_point last_refusal_{};
};

}  // namespace dlock::detail
