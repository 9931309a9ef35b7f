// SPDX-License-Identifier: BSL-1.0
/// @file
/// The store contract (v2): what a lock needs from a backend, and what a backend may offer.
#pragma once

#include <dlock/export.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

namespace dlock {

/// What a lease is for. Stores say which kinds they serve in store_traits::kinds.
enum class lease_kind : std::uint8_t {
    mutex = 1,   ///< one holder
    read = 2,    ///< one of many readers (read-write lock)
    write = 4,   ///< the one writer (read-write lock)
    permit = 8,  ///< one of `capacity` permits (semaphore)
    /// The leader of an election (dlock::election), where the store keeps elections in a
    /// layout of their own (ZooKeeper: Curator's LeaderLatch); elsewhere an election's lease
    /// is a mutex.
    leader = 16,
};

/// One acquire attempt.
struct lease_request {
    std::string name{};                   ///< the lock name as the lock sees it (registry prefix included)
    std::string token{};                  ///< the lease token: unique per lease, reused by retries of the same lease
    std::chrono::milliseconds ttl{0};     ///< the lease asked for (the store may grant less: granted_ttl)
    lease_kind kind = lease_kind::mutex;  ///< what the lease is for
    unsigned capacity = 1;                ///< permits of a semaphore; 1 otherwise
    /// If the name is taken, also queue `token` (FIFO) so that the holder's release hands the
    /// name straight to it. Only with store_traits::direct_handoff or inherent_queue, and only
    /// while `token` is watched (watch with a token, after its `ready`).
    bool queue = false;
};

/// Outcome of one acquire attempt.
struct acquire_result {
    bool acquired = false;  ///< the lease is ours (new, or already ours for this token)
    /// With `acquired`: the lease's fencing token, strictly increasing per store lease of a
    /// name (an idempotent retry with the same lease token returns the same value).
    std::uint64_t fencing_token = 0;
    /// With `acquired`: the lease the store set, counted from no earlier than the request's
    /// send time (it may be shorter than asked for, never longer).
    std::chrono::milliseconds granted_ttl{0};
    /// Without `acquired`: the holder's remaining lease; negative if unknown.
    std::chrono::milliseconds holder_ttl{-1};
    /// With `acquired`: what the store needs back on renew and release (a node path, a row
    /// id); empty for stores that find the lease by name and token.
    std::string lease_ref{};
    /// Per-session stores: the session whose life the lease shares (0: per-lease store).
    std::uint64_t session = 0;
};

/// Names one held lease in renew and release.
struct lease_key {
    std::string name{};                   ///< as lease_request::name
    std::string token{};                  ///< as lease_request::token
    std::string ref{};                    ///< acquire_result::lease_ref
    lease_kind kind = lease_kind::mutex;  ///< as lease_request::kind
};

/// Outcome of one renewal.
struct renew_result {
    bool owned = false;      ///< the lease was still ours and is extended
    bool contended = false;  ///< another owner tried to take the name since the last renewal
};

/// A store-side view of one name, for operators and tests.
struct lock_status {
    bool held = false;  ///< a lease holds the name now
    /// Remaining lease, -1 if unknown. Per-session stores: a holder of the asking store's own
    /// session to the millisecond; etcd tells another client's in whole seconds (reported as
    /// the middle of that second); ZooKeeper tells no client another session's (-1).
    std::chrono::milliseconds ttl{-1};
    std::uint64_t fencing_token = 0;       ///< of the current lease if held
    std::uint64_t last_fencing_token = 0;  ///< the highest token issued in the name's counter
    std::string holder{};                  ///< the holder's lease token
    std::size_t queued = 0;                ///< waiters queued for a direct hand-off (0 if the store does not queue)
    std::string key{};                     ///< where the store keeps the lease (key, node, row), for operators
    // A read-write lock or a semaphore (`kind` read or permit):
    lease_kind kind = lease_kind::mutex;  ///< what the name is: mutex, read (a read-write lock) or permit
    std::size_t holders = 0;              ///< leases held now: readers, the writer, or permits
    bool writer = false;                  ///< the holder is a writer
    unsigned capacity = 0;                ///< a semaphore's permits
    /// The value the holder proclaimed (elections: async_proclaim), filled by async_leader;
    /// none if the holder has proclaimed nothing.
    std::optional<std::string> value{};
};

/// Why a watcher is woken.
enum class watch_event : std::uint8_t {
    ready,     ///< notifications for the name (and the token's grants) flow from now on
    released,  ///< the name was released
    resync,    ///< notifications may have been lost (reconnect): re-check now
    granted,   ///< the holder's release handed the name to the watched token
};

/// What a direct hand-off tells its new holder (watch_event::granted).
struct grant_notice {
    std::uint64_t fencing_token = 0;   ///< the handed lease's fencing token
    std::chrono::milliseconds ttl{0};  ///< the lease the store set at the hand-off
    std::string lease_ref{};           ///< as acquire_result::lease_ref
    /// As acquire_result::session: the session the handed lease lives by (per-session
    /// stores; 0 otherwise). A hand-off without it could not follow its session's events.
    std::uint64_t session = 0;
};

/// How long a store's leases live.
enum class liveness : std::uint8_t {
    per_lease,    ///< each lease has its own expiry and is renewed on its own (Redis, SQL lease table)
    per_session,  ///< every lease lives as long as one session (ZooKeeper, etcd lease)
};

/// What a store can do; read once when a registry is built.
struct store_traits {
    /// A release hands the name to the first live queued waiter in the same step
    /// (lease_request::queue, watch_event::granted). False: waiters are woken to retry.
    bool direct_handoff = false;
    /// Every acquire joins the store's own FIFO (ZooKeeper sequence nodes, etcd revisions).
    bool inherent_queue = false;
    /// How the store's leases live: each on its own, or all with one session.
    liveness live = liveness::per_lease;
    /// Loss is noticed within a lease (false: only at the next round trip; fencing required).
    bool bounded_loss = true;
    /// Per-session stores: the watchdog still renews each lease on its schedule, to confirm
    /// that it exists (an operator may delete one lease); such a renewal does not move the
    /// lease's end, the session's events do.
    bool confirms_leases = false;
    /// Fencing tokens survive a restart of the store.
    bool durable_fencing = true;
    /// Watches report releases (watch_event::released). False (memcached): a watch gives
    /// `ready` only, and waiters sleep until the holder's remaining lease (holder_ttl).
    bool release_notifications = true;
    /// Renewals asked in the same turn go to the store as one request: the watchdog then
    /// aligns renewal times on a grid (a sixteenth of the renewal interval) so they do.
    bool batches_renewals = false;
    /// Lease kinds served (lease_kind values or-ed together).
    unsigned kinds = static_cast<unsigned>(lease_kind::mutex);
    /// Leases are whole multiples of this, at least min_ttl and at most max_ttl.
    std::chrono::milliseconds ttl_granularity{1};
    std::chrono::milliseconds min_ttl{1};                                 ///< the shortest lease
    std::chrono::milliseconds max_ttl{std::chrono::milliseconds::max()};  ///< the longest lease
};

/// What a registry may be asked for beyond the mutex. A store declares what it serves
/// (store::capabilities(): its lease kinds, and the latch and election interfaces it
/// implements); a registry built with lock_config::needs refuses a store that lacks one when
/// it is built (registry::config_error(): not_supported), not at first use.
enum class capability : unsigned {
    read_write = 1,  ///< registry::obtain_rw
    semaphore = 2,   ///< registry::obtain_semaphore
    latch = 4,       ///< dlock::latch
    election = 8,    ///< dlock::election and leader_observer
};
/// Capabilities or-ed together, for lock_config::needs.
constexpr unsigned operator|(capability a, capability b) noexcept
{
    return static_cast<unsigned>(a) | static_cast<unsigned>(b);
}
/// One more capability added to a set of them.
constexpr unsigned operator|(unsigned a, capability b) noexcept
{
    return a | static_cast<unsigned>(b);
}

/// What `t` serves of the lease kinds (read_write, semaphore), as capability values or-ed
/// together; store::capabilities() adds latches and elections.
constexpr unsigned capabilities_of(const store_traits& t) noexcept
{
    auto has = [&](lease_kind k) { return (t.kinds & static_cast<unsigned>(k)) != 0; };
    unsigned c = 0;
    if (has(lease_kind::read) && has(lease_kind::write))
        c |= static_cast<unsigned>(capability::read_write);
    if (has(lease_kind::permit))
        c |= static_cast<unsigned>(capability::semaphore);
    return c;
}

class latch_capability;
class election_capability;
class store;
namespace detail {
/// Expires with `s` (objects that may outlive a store skip talking to one that is gone).
std::weak_ptr<void> lifetime_of(const store& s) noexcept;
}  // namespace detail

/// A session store's liveness (store_traits::live == per_session).
enum class session_event : std::uint8_t {
    up,        ///< a session exists; leases taken from now on belong to it
    suspect,   ///< the store has not confirmed the session lately (connection lost)
    restored,  ///< confirmed again: its leases are intact
    lost,      ///< the session ended: every lease of it is gone
};

/// A per-session store's current session (store::session(), store::watch_session()).
struct session_info {
    std::uint64_t generation = 0;                         ///< session id, lease id, backend pid
    std::chrono::steady_clock::time_point valid_until{};  ///< last confirmation's send time + ttl - drift
    std::chrono::milliseconds ttl{0};                     ///< negotiated or granted
};

/// The largest count a latch may have (exact in the Lua numbers of the Redis scripts).
inline constexpr std::uint64_t max_latch_count = std::uint64_t{1} << 40;

/// A count-down latch as the store keeps it (latch_capability::async_latch_state).
struct latch_state {
    /// The count the latch was created with by its first count-down; 0: no such latch (never
    /// counted down, or expired).
    std::uint64_t count = 0;
    /// Count-downs still missing (`count` minus the distinct members so far; 0 once done).
    std::uint64_t remaining = 0;
};

/// The contract every backend implements.
///
/// - Operations are one round trip (or one pipelined batch), idempotent for the same lease
///   token, and complete on the store's executor, never inside the initiating call.
/// - Operations on one lease token take effect in the order they were started: a release
///   never overtakes its token's acquire (the lock gives a token back while its attempt is
///   still on the wire, and does not send that release twice).
/// - Watches: `cb` runs on the store's executor, never inside watch(), never after unwatch().
/// - The templates copy their string arguments (a deferred operation may start after the
///   caller's strings are gone).
///
/// @completion Each operation's signature is named below; completions run on the store's
/// executor, never inside the initiating call.
/// @errors Transient ones (is_transient()) may be retried by the caller; any other error is
/// permanent and the caller stops. closed once the store is closed or destroyed. The
/// server's text of the last failure is kept for diagnostics (last_error_text()), apart
/// from the error code. Each store's page lists its own.
/// @cancellation Store-specific: redis_store, cluster_store and redlock_store pass the
/// handler's cancellation slot to their requests (see each); the other stores do not honour
/// cancellation (each request is bounded by the store's request timeout). The lock itself
/// never cancels a store operation: it lets it finish and undoes what it took.
/// @threadsafety None: use the store from its executor only.
class DLOCK_API store {
public:
    /// async_try_acquire's completion: the error, and the attempt's outcome.
    using acquire_signature = void(boost::system::error_code, acquire_result);
    /// async_renew's completion: the error, and the renewal's outcome.
    using renew_signature = void(boost::system::error_code, renew_result);
    /// async_release's and async_force_release's completion: the error, and whether it was held.
    using bool_signature = void(boost::system::error_code, bool);
    /// async_status's completion: the error, and the name's state.
    using status_signature = void(boost::system::error_code, lock_status);
    /// async_connect's completion.
    using connect_signature = void(boost::system::error_code);
    /// Names one watch (watch(), watch_session()) for unwatch().
    using watch_id = std::uint64_t;
    /// What a watch calls: the event, and with watch_event::granted the hand-off's details.
    using watch_callback = std::function<void(watch_event, const grant_notice&)>;

    /// Virtual: stores are used through `store&`. Each store's destructor says what it ends.
    virtual ~store() = default;
    /// Where every completion runs.
    virtual boost::asio::any_io_executor get_executor() const = 0;
    /// What this store can do. Constant over the store's life.
    virtual store_traits traits() const noexcept { return {}; }
    /// One line naming the store and where it is, for logs (passwords redacted).
    virtual std::string describe() const = 0;
    /// Closes connections: pending operations complete with error::closed.
    virtual void close() {}
    /// The server's text of the most recent failed operation (untrusted; empty if none).
    const std::string& last_error_text() const noexcept { return last_error_text_; }

    /// The count-down latches the store keeps (dlock/capabilities.hpp); null if it keeps none.
    virtual latch_capability* latches() noexcept { return nullptr; }
    /// The elections the store keeps (dlock/capabilities.hpp); null if it keeps none.
    virtual election_capability* elections() noexcept { return nullptr; }
    /// What the store serves beyond the mutex, as capability values or-ed together: its
    /// lease kinds (capabilities_of(traits())), and latches and elections if it keeps them.
    unsigned capabilities() const noexcept;

    /// Connects (and checks credentials and permissions where the store can) before first use;
    /// optional: operations connect on demand.
    /// @completion connect_signature: `void(error_code)`; a store with nothing to connect to
    /// completes (posted) with success.
    /// @errors The store's connect errors (connect_failed, resolve_failed, auth_failed,
    /// tls_failed, handshake_failed, permission_denied, timeout, ...), closed.
    /// @cancellation As the store's (see the class).
    template <class Token = boost::asio::deferred_t>
    auto async_connect(Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, connect_signature>([this](auto h) { do_connect(std::move(h)); }, tok);
    }

    /// Takes `req.name` for `req.token` if it is free or already ours (and queues the token
    /// if asked and the name is taken). Idempotent for the same token.
    /// @completion acquire_signature: `void(error_code, acquire_result)`; a name held
    /// elsewhere is success with acquired = false.
    /// @errors invalid_lease (a ttl outside store_traits' bounds), invalid_name,
    /// kind_mismatch, not_supported (a kind not in store_traits::kinds), and the store's.
    /// @cancellation As the store's (see the class). A cancelled attempt may still have
    /// taken the lease: release the token.
    template <class Token = boost::asio::deferred_t>
    auto async_try_acquire(const lease_request& req, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, acquire_signature>(
            [this](auto h, const lease_request& r) { do_try_acquire(r, std::move(h)); }, tok, req);
    }
    /// A mutex attempt, not queued: async_try_acquire(lease_request{name, token, ttl}).
    /// @completion acquire_signature, as the overload above.
    /// @errors As the overload above.
    /// @cancellation As the overload above.
    template <class Token = boost::asio::deferred_t>
    auto async_try_acquire(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                           Token&& tok = {})
    {
        return async_try_acquire(lease_request{name, token, ttl}, std::forward<Token>(tok));
    }

    /// Extends the lease to `ttl` from now if it is still ours (owned = false if not), and
    /// reports whether another owner has asked for the name meanwhile. Per-session stores
    /// confirm that the lease exists; its end moves with the session.
    /// @completion renew_signature: `void(error_code, renew_result)`; a lease that is not
    /// ours is success with owned = false.
    /// @errors invalid_lease, and the store's (after a transient one the renewal may or may
    /// not have run).
    /// @cancellation As the store's (see the class).
    template <class Token = boost::asio::deferred_t>
    auto async_renew(const lease_key& key, std::chrono::milliseconds ttl, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, renew_signature>(
            [this](auto h, const lease_key& k, std::chrono::milliseconds ttl) { do_renew(k, ttl, std::move(h)); }, tok,
            key, ttl);
    }
    /// A mutex lease found by name and token: async_renew(lease_key{name, token}, ttl).
    /// @completion renew_signature, as the overload above.
    /// @errors As the overload above.
    /// @cancellation As the overload above.
    template <class Token = boost::asio::deferred_t>
    auto async_renew(const std::string& name, const std::string& token, std::chrono::milliseconds ttl, Token&& tok = {})
    {
        return async_renew(lease_key{name, token, {}}, ttl, std::forward<Token>(tok));
    }

    /// Frees the name if the lease holds it (handing it on or waking its watchers); false if
    /// it was not held by that lease. A queued token that does not hold is withdrawn.
    /// @completion bool_signature: `void(error_code, bool released)`.
    /// @errors The store's; transient ones may be retried (a release is idempotent).
    /// @cancellation As the store's (see the class); a cancelled release may still have run.
    template <class Token = boost::asio::deferred_t>
    auto async_release(const lease_key& key, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, bool_signature>(
            [this](auto h, const lease_key& k) { do_release(k, std::move(h)); }, tok, key);
    }
    /// A mutex lease found by name and token: async_release(lease_key{name, token}).
    /// @completion bool_signature, as the overload above.
    /// @errors As the overload above.
    /// @cancellation As the overload above.
    template <class Token = boost::asio::deferred_t>
    auto async_release(const std::string& name, const std::string& token, Token&& tok = {})
    {
        return async_release(lease_key{name, token, {}}, std::forward<Token>(tok));
    }

    /// Operator's escape hatch: frees the name whoever holds it; true if it was held. The
    /// holder finds out at its next renewal or release (lock_lost).
    /// @completion bool_signature: `void(error_code, bool was_held)`.
    /// @errors The store's.
    /// @cancellation As the store's (see the class).
    template <class Token = boost::asio::deferred_t>
        requires(!std::is_same_v<std::decay_t<Token>, lease_kind>)
    auto async_force_release(const std::string& name, Token&& tok = {})
    {
        return async_force_release(name, lease_kind::mutex, std::forward<Token>(tok));
    }
    /// The escape hatch for one side of a read-write lock (Redisson's per-side
    /// forceUnlock): `side` lease_kind::read frees every reader's lease, lease_kind::write the
    /// writer's, and the queue is served as after a release (a waiting writer gets in once no
    /// reader is left). Any other kind frees every lease of the name, as
    /// async_force_release(name). True if a lease of that side was held.
    /// @completion bool_signature: `void(error_code, bool was_held)`.
    /// @errors not_supported (read or write on a store without read-write locks); the store's.
    /// @cancellation As the store's (see the class).
    template <class Token = boost::asio::deferred_t>
    auto async_force_release(const std::string& name, lease_kind side, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, bool_signature>(
            [this](auto h, const std::string& n, lease_kind k) { do_force_release(n, k, std::move(h)); }, tok, name,
            side);
    }

    /// The store's view of `name`, for operators and tests (not used by the lock itself).
    /// Changes nothing.
    /// @completion status_signature: `void(error_code, lock_status)`.
    /// @errors The store's.
    /// @cancellation As the store's (see the class).
    template <class Token = boost::asio::deferred_t>
    auto async_status(const std::string& name, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, status_signature>(
            [this](auto h, const std::string& n) { do_status(n, std::move(h)); }, tok, name);
    }

    /// Watches `name`: `cb(ready)` once notifications flow (a retry from then on cannot miss
    /// a release), then `cb(released)` on each release and `cb(resync)` when some may have
    /// been missed. With a `token` (direct hand-off): also `cb(granted, notice)` when a
    /// release hands the name to that token; queue the token only after `ready`.
    virtual watch_id watch(const std::string& name, const std::string& token, watch_callback cb) = 0;
    /// Watches releases only.
    watch_id watch(const std::string& name, std::function<void(watch_event)> cb)
    {
        return watch(name, std::string(), [cb = std::move(cb)](watch_event ev, const grant_notice&) { cb(ev); });
    }
    /// Stops the callbacks of `id` at once.
    virtual void unwatch(watch_id id) = 0;

    /// Per-session stores: the current session (generation 0 if none).
    virtual session_info session() const noexcept { return {}; }
    /// Per-session stores: calls `cb` on each session event. Stop with unwatch().
    virtual watch_id watch_session(std::function<void(session_event, const session_info&)> cb)
    {
        (void)cb;
        return 0;
    }

    /// Shorthand for traits().direct_handoff.
    bool direct_handoff() const noexcept { return traits().direct_handoff; }

private:
    friend std::weak_ptr<void> detail::lifetime_of(const store& s) noexcept;
    std::shared_ptr<int> lifetime_ = std::make_shared<int>(0);

protected:
    /// Expires with the store: lets objects that may outlive it (a lock's state held by a
    /// handler still queued in the io_context) skip talking to a store that is gone.
    std::weak_ptr<void> lifetime() const noexcept { return lifetime_; }

    // What a backend implements: each do_* starts the operation of the same name and must
    // complete `h` as the class's contract says (on the executor, never inside the call).

    /// async_connect. Default: nothing to connect to; completes (posted) with success.
    virtual void do_connect(boost::asio::any_completion_handler<connect_signature> h);
    /// async_try_acquire.
    virtual void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) = 0;
    /// async_renew.
    virtual void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                          boost::asio::any_completion_handler<renew_signature> h) = 0;
    /// async_release.
    virtual void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) = 0;
    /// async_force_release: `side` read or write frees that side of a read-write lock only;
    /// any other kind, every lease of the name.
    virtual void do_force_release(const std::string& name, lease_kind side,
                                  boost::asio::any_completion_handler<bool_signature> h) = 0;
    /// async_status.
    virtual void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) = 0;

    /// Keeps the server's text of a failure for last_error_text().
    void set_error_text(std::string text) { last_error_text_ = std::move(text); }

    /// Calls set_error_text if this store still exists when a reply comes: a small object,
    /// copied into each completion without an allocation (a std::function of it would not be).
    /// @threadsafety Call it on the store's executor, as the store.
    class error_text_keeper {
    public:
        /// Keeps `text` as the store's last_error_text(), if the store still exists.
        void operator()(std::string text) const
        {
            if (!alive_.expired())
                store_->set_error_text(std::move(text));
        }

    private:
        friend class store;
        error_text_keeper(store* s, std::weak_ptr<void> alive) : store_(s), alive_(std::move(alive)) {}
        store* store_;
        std::weak_ptr<void> alive_;
    };
    /// An error_text_keeper for this store, to copy into a completion.
    error_text_keeper keep_error_text() { return {this, lifetime()}; }

private:
    std::string last_error_text_{};
};

}  // namespace dlock
