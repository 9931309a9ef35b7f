// The store contract: what a lock needs from a backend (Redis, memory, later others).
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace dlock {

/// Outcome of one acquire attempt.
struct acquire_result {
    bool acquired = false;
    /// With `acquired`: the lease's fencing token, strictly increasing per store lease of a
    /// name (an idempotent retry with the same lease token returns the same value).
    std::uint64_t fencing_token = 0;
    /// Without `acquired`: the holder's remaining lease; negative if unknown.
    std::chrono::milliseconds holder_ttl{-1};
};

/// Outcome of one renewal.
struct renew_result {
    bool owned = false;      ///< the lease was still ours and is extended
    bool contended = false;  ///< another owner tried to take the name since the last renewal
};

/// A store-side view of one name, for operators and tests.
struct lock_status {
    bool held = false;
    std::chrono::milliseconds ttl{-1};      ///< remaining lease, -1 if unknown
    std::uint64_t fencing_token = 0;        ///< of the current lease if held
    std::uint64_t last_fencing_token = 0;   ///< the highest token issued in the name's counter
    std::string holder;                     ///< the holder's lease token
    std::size_t queued = 0;                 ///< waiters queued for a direct hand-off (0 if the store does not queue)
};

/// Why a watcher is woken.
enum class watch_event : std::uint8_t {
    ready,     ///< notifications for the name flow from now on: a retry now cannot miss one
    released,  ///< the name was released
    resync,    ///< notifications may have been lost (reconnect): re-check now
    granted,   ///< (watch_grant only) the holder's release handed the name to this token
};

/// What a direct hand-off tells its new holder (watch_event::granted).
struct grant_notice {
    std::uint64_t fencing_token = 0;
    std::chrono::milliseconds ttl{0};  ///< the lease the store set at the hand-off
};

/// The contract every backend implements. The templates copy their string arguments (a
/// deferred operation may start after the caller's strings are gone). All operations are one round trip, idempotent for
/// the same lease token, and complete on the store's executor. `name` is the lock name
/// as the user gave it; the store maps it to its own keys. Thread safety: none; use the
/// store from its executor only.
class store {
public:
    using acquire_signature = void(boost::system::error_code, acquire_result);
    using renew_signature = void(boost::system::error_code, renew_result);
    using bool_signature = void(boost::system::error_code, bool);
    using status_signature = void(boost::system::error_code, lock_status);
    using watch_id = std::uint64_t;

    virtual ~store() = default;
    /// Where every completion runs.
    virtual boost::asio::any_io_executor get_executor() const = 0;

    /// Expires with the store: lets objects that may outlive it (a lock's state held by a
    /// handler still queued in the io_context) skip talking to a store that is gone.
    std::weak_ptr<void> lifetime() const noexcept { return lifetime_; }

    /// Takes the name for `token` with a lease of `ttl` if it is free or already ours.
    template <class Token = boost::asio::deferred_t>
    auto async_try_acquire(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                           Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, acquire_signature>(
            [this](auto h, const std::string& n, const std::string& t, std::chrono::milliseconds ttl) {
                do_try_acquire(n, t, ttl, std::move(h));
            },
            tok, name, token, ttl);
    }

    /// As async_try_acquire; if the name is held, also queues `token` (FIFO) so that the
    /// holder's release hands the name straight to it: no second round trip, no herd.
    /// Only for stores with direct_handoff(), and only while `token` is watched by
    /// watch_grant(). A release of `token` that finds it not holding withdraws it from the queue.
    template <class Token = boost::asio::deferred_t>
    auto async_try_acquire_queued(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                                  Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, acquire_signature>(
            [this](auto h, const std::string& n, const std::string& t, std::chrono::milliseconds ttl) {
                do_try_acquire_queued(n, t, ttl, std::move(h));
            },
            tok, name, token, ttl);
    }

    /// Extends the lease to `ttl` from now if `token` still holds it (owned = false if not),
    /// and reports whether another owner has asked for the name meanwhile.
    template <class Token = boost::asio::deferred_t>
    auto async_renew(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                     Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, renew_signature>(
            [this](auto h, const std::string& n, const std::string& t, std::chrono::milliseconds ttl) {
                do_renew(n, t, ttl, std::move(h));
            },
            tok, name, token, ttl);
    }

    /// Frees the name if `token` holds it and wakes its watchers; false if it was not held by `token`.
    template <class Token = boost::asio::deferred_t>
    auto async_release(const std::string& name, const std::string& token, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, bool_signature>(
            [this](auto h, const std::string& n, const std::string& t) { do_release(n, t, std::move(h)); }, tok,
            name, token);
    }

    /// Operator's escape hatch: frees the name whoever holds it; true if it was held.
    template <class Token = boost::asio::deferred_t>
    auto async_force_release(const std::string& name, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, bool_signature>(
            [this](auto h, const std::string& n) { do_force_release(n, std::move(h)); }, tok, name);
    }

    /// The store's view of `name`, for operators and tests (not used by the lock itself).
    template <class Token = boost::asio::deferred_t>
    auto async_status(const std::string& name, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, status_signature>(
            [this](auto h, const std::string& n) { do_status(n, std::move(h)); }, tok, name);
    }

    /// Calls `cb` with watch_event::ready once release notifications for `name` are active,
    /// then on each release or resync. Callbacks run on the store's executor, never inside
    /// watch() itself.
    virtual watch_id watch(const std::string& name, std::function<void(watch_event)> cb) = 0;
    /// Stops the callbacks of `id` (the engine also ignores any already queued).
    virtual void unwatch(watch_id id) = 0;

    /// Whether a release hands the name to the first live queued waiter in the same step
    /// (async_try_acquire_queued, watch_grant). False: waiters are only woken to retry.
    virtual bool direct_handoff() const noexcept { return false; }
    /// Calls `cb(ready)` once hand-offs to `token` can be delivered (queue it only after
    /// that), `cb(granted, notice)` when one is, and `cb(resync)` when one may have been
    /// missed (retry: an acquire by a token that holds the name succeeds). Stop with unwatch().
    virtual watch_id watch_grant(const std::string& name, const std::string& token,
                                 std::function<void(watch_event, grant_notice)> cb)
    {
        (void)name;
        (void)token;
        (void)cb;
        return 0;
    }

private:
    std::shared_ptr<int> lifetime_ = std::make_shared<int>(0);

protected:
    virtual void do_try_acquire(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                                boost::asio::any_completion_handler<acquire_signature> h) = 0;
    /// Default: the plain attempt (stores without direct_handoff()).
    virtual void do_try_acquire_queued(const std::string& name, const std::string& token,
                                       std::chrono::milliseconds ttl,
                                       boost::asio::any_completion_handler<acquire_signature> h)
    {
        do_try_acquire(name, token, ttl, std::move(h));
    }
    virtual void do_renew(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                          boost::asio::any_completion_handler<renew_signature> h) = 0;
    virtual void do_release(const std::string& name, const std::string& token,
                            boost::asio::any_completion_handler<bool_signature> h) = 0;
    virtual void do_force_release(const std::string& name, boost::asio::any_completion_handler<bool_signature> h) = 0;
    virtual void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) = 0;
};

}  // namespace dlock
