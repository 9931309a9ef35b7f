// SPDX-License-Identifier: BSL-1.0
/// @file
/// The memcached store: acquire by add with a TTL, renew and release by CAS on the owner's
/// value, over memcached's meta text protocol (1.6+). An efficiency lock, not a correctness lock.
#pragma once

#include <dlock/export.hpp>
#include <dlock/memcached/config.hpp>
#include <dlock/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace dlock {

/// The store contract over one or more memcached servers (no client library).
///
/// Keys: `<ns>:lock:<name>` holds "<token> <fence>" with the lease as its TTL (added with
/// fence 0; the fence is drawn only once the item is ours, then set by CAS, so tokens rise
/// in grant order); `<ns>:fence:<name>` the fencing counter (`ma`, never expiring);
/// `<ns>:contended:<name>` set by a refused owner, cleared by the holder's next renewal.
///
/// Honest limits (also in traits()):
/// - Whole-second leases, at least 2 s (memcached's clock ticks once a second: a 1 s TTL may
///   expire at once). The store sets each item's TTL one second longer than asked, so the
///   item never expires before the lease the holder counts on; a crashed holder's lock
///   lasts up to a second longer.
/// - No notifications: watch() gives `ready` and nothing else; waiters sleep until the
///   holder's remaining TTL (memcached's `t` flag, whole seconds) and retry.
/// - Eviction (run memcached with -M to refuse it instead), a restart, or a server that
///   leaves the list loses locks and resets fencing counters: tokens are not durable
///   (traits().durable_fencing is false) and may repeat after a restart.
///
/// Errors: connect_failed, connection_lost, timeout (transient); a server that answers
/// something that is not the meta protocol → protocol_error; SERVER_ERROR (out of memory)
/// → server_busy; a lease that is not whole seconds in 2 s .. 30 days → invalid_lease; a
/// name whose key exceeds memcached's 250 bytes → invalid_name.
/// @cancellation Not honoured: each request is bounded by the configured timeouts.
/// @threadsafety None: use it from its executor only.
class DLOCK_API memcached_store final : public store {
public:
    /// A store on `ex` over `cfg.servers` (none: one on 127.0.0.1:11211); it connects to a
    /// server when a name first needs it (async_connect: to every server).
    memcached_store(boost::asio::any_io_executor ex, memcached::config cfg);
    /// Closes the store (as close()): pending operations complete with error::closed.
    ~memcached_store() override;

    boost::asio::any_io_executor get_executor() const override;
    /// Per lease, no direct hand-off, no durable fencing, leases of whole seconds in 2 s .. 30 days - 1 s.
    store_traits traits() const noexcept override;
    /// "memcached memcached://host:port,... ns=dlock".
    std::string describe() const override;
    /// Only `ready` (posted), never `released`: memcached has no notifications.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    void unwatch(watch_id id) override;
    /// Closes every connection: pending operations complete with error::closed.
    void close() override;

    /// The server index (into config::servers) that holds `name`.
    std::size_t server_of(const std::string& name) const;
    /// `<ns>:lock:<name>`, the key that holds the lease, for tools and tests.
    std::string lock_key(const std::string& name) const;
    /// `<ns>:fence:<name>`, the name's fencing counter, for tools and tests.
    std::string fence_key(const std::string& name) const;

private:
    void do_connect(boost::asio::any_completion_handler<connect_signature> h) override;
    void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) override;
    void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                  boost::asio::any_completion_handler<renew_signature> h) override;
    void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) override;
    void do_force_release(const std::string& name, lease_kind side,
                          boost::asio::any_completion_handler<bool_signature> h) override;
    void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) override;

    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace dlock
