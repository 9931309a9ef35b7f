// SPDX-License-Identifier: BSL-1.0
/// @file
/// An in-process store: the store contract without a server, for tests and single-process use.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/export.hpp>
#include <dlock/store.hpp>

#include <memory>

namespace dlock {

/// Keeps leases in memory and measures them on steady_clock. Same contract and guarantees
/// as redis_store within one process; nothing is shared across processes.
/// @cancellation Not honoured: every operation completes at once (posted).
/// @threadsafety None: use it from its executor only.
class DLOCK_API memory_store final : public store, public latch_capability, public election_capability {
public:
    /// An empty store whose operations complete on `ex`. With `direct_handoff`, a release
    /// hands the name to the first queued waiter that is still watching (as redis_store
    /// does); without, it wakes the waiters to retry (as the Redlock and Cluster stores do).
    explicit memory_store(boost::asio::any_io_executor ex, bool direct_handoff = false);
    /// Drops every lease; operations already posted still complete.
    ~memory_store() override;

    boost::asio::any_io_executor get_executor() const override;
    store_traits traits() const noexcept override;
    /// Latches and elections: kept here, as every other lease.
    latch_capability* latches() noexcept override;
    election_capability* elections() noexcept override;
    std::string describe() const override;
    using store::watch;
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    void unwatch(watch_id id) override;

    /// Number of names with a live lease (expired ones are dropped lazily).
    std::size_t size() const;
    /// Test hook: drop the lease of `name` as if it had expired, without notifying.
    void expire_now(const std::string& name);
    /// Tokens queued for `name` (direct hand-off).
    std::size_t queued(const std::string& name) const;
    /// Test hook: the next `count` operations (acquire, renew, release) fail with `ec`, and
    /// last_error_text() becomes `text`, as a server's refusal would.
    void fail_next(boost::system::error_code ec, std::string text = {}, unsigned count = 1);
    /// Watches now registered (a cancelled wait must leave none behind).
    std::size_t watch_count() const;

private:
    void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) override;
    void hand_on_or_free(const std::string& name);
    void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                  boost::asio::any_completion_handler<renew_signature> h) override;
    void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) override;
    void do_force_release(const std::string& name, lease_kind side,
                          boost::asio::any_completion_handler<bool_signature> h) override;
    void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) override;

    // Count-down latches (the last block of memory_store.cpp).
    void do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                       std::chrono::milliseconds ttl,
                       boost::asio::any_completion_handler<count_down_signature> h) override;
    void do_latch_state(const std::string& name, boost::asio::any_completion_handler<latch_state_signature> h) override;

    // Elections (the last block of memory_store.cpp).
    void do_proclaim(const lease_key& key, const std::string& value,
                     boost::asio::any_completion_handler<proclaim_signature> h) override;
    void do_leader(const std::string& name, boost::asio::any_completion_handler<leader_signature> h) override;

    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace dlock
