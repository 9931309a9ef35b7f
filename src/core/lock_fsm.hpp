// SPDX-License-Identifier: BSL-1.0
// The per-name lock state machine, sans-io: local waiters and holds, the one store
// conversation (attempt, watch, queue, grant), the lease (renew, suspect, lost) and release.
// It owns no timer, socket, clock or handler: each input carries the time, and every effect
// comes out as an action for the driver (src/core/lock_driver.cpp) to perform in order.
#pragma once

#include <dlock/stats.hpp>
#include <dlock/store.hpp>

#include "common/backoff.hpp"
#include "common/boxed.hpp"

#include <boost/container/devector.hpp>
#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace dlock::detail {

using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using std::chrono::milliseconds;

/// Settings the machine needs, derived once from lock_config and the store's traits.
struct fsm_config {
    milliseconds lease{30'000};
    milliseconds drift{302};
    milliseconds renew_every{10'000};
    bool watchdog = true;
    unsigned handoff_budget = 16;
    milliseconds backoff_min{5};
    milliseconds backoff_max{1'000};
    std::chrono::microseconds yield_pause{500};
    bool direct_handoff = false;  ///< store_traits::direct_handoff
    bool inherent_queue = false;  ///< store_traits::inherent_queue: a queued wait is woken by the store
    bool per_session = false;     ///< store_traits::live == per_session: the session keeps leases alive
    bool confirms = false;        ///< per_session with store_traits::confirms_leases: renewals confirm only
    bool events = true;           ///< emit `event` actions (false: lock_config::on_event is empty)
    /// A read lease: every local waiter shares it at once (the read side of a read-write
    /// lock), as long as no other process has asked for the name since the last check.
    bool shared = false;
    /// Renewals fall on multiples of this (0: none), so that many leases renew in the same
    /// turn and a store that batches them sends one request (store_traits::batches_renewals).
    milliseconds renew_grid{0};
};

/// Lease token characters; a token's counter is written in them too (digits first).
inline constexpr char token_digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_";

/// What every machine of a registry shares (one per lease kind): held by reference, so
/// that a held lock does not carry its own copy of the configuration (issue 16: memory).
struct fsm_context {
    fsm_config cfg;
    lock_stats& stats;
    std::minstd_rand& rng;
    std::string token_prefix;  ///< lease tokens are this + ++token_seq
    std::uint64_t& token_seq;  ///< the registry's: a name's state made anew never reuses a token
    /// An action buffer lent between machines: a held lock keeps none of its own.
    std::vector<struct fsm_action> spare_actions{};
};

/// One effect for the driver. A flat struct so tests can read it field by field.
struct fsm_action {
    enum class type : std::uint8_t {
        attempt,           ///< store try_acquire(token, queue); answer with on_attempt_done
        watch,             ///< store watch(name, token); its events go to on_watch
        unwatch,           ///< stop the watch (no event of it may arrive after this)
        set_timer,         ///< (re)arm the one timer for `at`; answer with on_timer
        cancel_timer,      ///< no deadline any more
        renew,             ///< store renew(token, ref); answer with on_renew_done
        release,           ///< store release(token, ref); answer with on_release_done(id)
        complete_waiter,   ///< waiter `id` ends: `ec`, or a hold `hold` with `fence`
        complete_release,  ///< the release `id` ends with `ec`
        lost,              ///< the lease is lost: signal every hold
        event,             ///< lock_config::on_event(kind, fence)
    };
    type t{};
    std::string token{};      ///< attempt, watch, renew, release
    std::string ref{};        ///< renew, release: the store's lease reference
    bool queue = false;       ///< attempt
    std::uint64_t id = 0;     ///< complete_waiter, complete_release, release (0: nobody waits for it)
    std::uint64_t hold = 0;   ///< complete_waiter with a hold
    std::uint64_t fence = 0;  ///< complete_waiter, event
    boost::system::error_code ec{};
    time_point at{};         ///< set_timer
    lock_event_kind kind{};  ///< event
    bool by_io = false;      ///< the driver's own mark: made by an I/O completion (the machine leaves it)
};

/// The phase of the name's store conversation (see docs/lock-machine.md for the table).
enum class fsm_state : std::uint8_t {
    free,        ///< no lease, nobody waiting
    attempting,  ///< an acquire attempt is in flight
    waiting,     ///< failed; waiting for a notification, the holder's expiry or a backoff
    queued,      ///< waiting with our token queued at the store for a direct hand-off
    held,        ///< we hold the lease
    renewing,    ///< held, a renewal in flight
    suspect,     ///< held, the last renewal failed: retrying until the local deadline
    lost,        ///< the lease ended while held: holds remain until released
};

class lock_fsm {
public:
    /// `ctx` outlives the machine.
    explicit lock_fsm(fsm_context& ctx);

    // ---- inputs: each appends its effects to actions() ----
    /// A caller asks for the name. `try_once`: one attempt, no waiting.
    void on_acquire(std::uint64_t waiter, std::uint64_t owner, bool try_once, time_point now);
    /// A waiter leaves before it is served (cancelled: operation_aborted; its limit passed: timeout).
    void on_cancel(std::uint64_t waiter, boost::system::error_code why, time_point now);
    /// The bound of a waiter passed (acquire_for): it gets at least one attempt first.
    void on_deadline(std::uint64_t waiter, time_point now);
    void on_attempt_done(boost::system::error_code ec, const acquire_result& res, time_point now);
    void on_watch(watch_event ev, const grant_notice& g, time_point now);
    void on_timer(time_point now);
    void on_renew_done(boost::system::error_code ec, const renew_result& res, time_point now);
    /// A hold ends; `release_id` 0 when nobody waits for the outcome (a guard's destructor).
    void on_release(std::uint64_t hold, std::uint64_t release_id, time_point now);
    void on_release_done(std::uint64_t release_id, boost::system::error_code ec, bool owned, time_point now);
    void on_session(session_event ev, const session_info& info, time_point now);
    /// This registry force-released the name at the store (lock::force_release): a lease held
    /// here may be gone. Nobody new joins it or is handed it, and a renewal asks the store now.
    void on_forced(time_point now);

    // ---- outputs and queries ----
    std::vector<fsm_action>& actions() noexcept { return actions_; }
    /// The driver took every action: the action buffer goes back to the context's spare (or
    /// is freed) and an empty waiter queue lets go of its capacity, so that a lock at rest
    /// carries neither.
    void release_buffers() noexcept;
    fsm_state state() const noexcept;
    /// Nothing to do and nothing in flight: the driver may be freed.
    bool idle() const noexcept;
    /// The lease's local deadline; min() when there is none or it is lost.
    time_point valid_until() const noexcept;
    bool lost() const noexcept { return lease_ && lease_->lost; }
    /// A read lease nobody holds, kept for one turn: its release is still to be sent (the
    /// driver counts it in flight, so that registry::async_drain waits for it).
    bool lingering() const noexcept { return linger_; }
    std::size_t waiters() const noexcept { return waiters_.size(); }
    std::size_t holds() const noexcept { return holds_.size(); }
    /// Store requests in flight (attempts, renewals, releases).
    std::size_t in_flight() const noexcept;
    /// The fencing token of the current lease (0 if none).
    std::uint64_t fence() const noexcept { return lease_ ? lease_->fence : 0; }
    /// The current lease's store token and reference (empty if none), for fenced writes.
    std::pair<std::string, std::string> lease_id() const
    {
        return lease_ ? std::pair{lease_->token, lease_->ref} : std::pair<std::string, std::string>{};
    }

private:
    struct waiter_entry {
        std::uint64_t id;
        std::uint64_t owner;
        bool try_once;
        std::uint64_t seen_from;  // attempts sent before it came
        time_point started;
        bool expired = false;    // its bound passed: ends at the next failed attempt
        bool attempted = false;  // an attempt sent after it came has been answered
    };
    struct lease_state {
        std::string token, ref;
        std::uint64_t fence = 0;
        std::uint64_t session = 0;
        time_point valid_until;
        time_point next_renew;
        bool suspect = false;
        bool lost = false;
        bool gone = false;  // lost, and the store said so (not ours, session ended)
    };
    struct renew_state {
        std::string token;
        time_point sent;
    };
    struct attempt_state {
        std::string token;
        time_point sent;
        std::uint64_t seq;
        bool spent = false;  // its waiters left: already released, its reply only ends it
    };
    struct wait_state {
        bool watching = false;
        bool ready = false;
        std::string token;                       // direct hand-off: one token for the whole wait
        std::optional<time_point> queued_since;  // send time of its first queued attempt
        boxed<grant_notice> grant;               // came while an attempt was in flight
        bool sleeping = false;                   // until the timer or a notification
        bool notified = false;                   // an event came while an attempt was in flight
    };
    struct release_state {
        std::uint64_t id;
        std::string token, ref;
        std::uint64_t fence;
        time_point deadline;  // the lease's: retrying past it cannot matter
        int attempt = 0;
    };

    void push(fsm_action a)
    {
        if (actions_.capacity() == 0)
            actions_.swap(ctx_.spare_actions);
        actions_.push_back(std::move(a));
    }
    void emit(lock_event_kind kind, std::uint64_t fence);
    void set_timer(time_point at);
    void observe(time_point now);   // a lease past its deadline is lost, whoever notices first
    void schedule(time_point now);  // the one place that starts the next store step
    void start_attempt(time_point now);
    void start_watch();
    void end_wait(bool withdraw);
    void grant_front(time_point now);
    void grant_one(time_point now);
    /// Counts one hold served from the current lease without the store; when the budget is
    /// spent, asks the store (a renewal) whether another process waits.
    void spend_local_turn(time_point now);
    bool joinable(time_point now) const noexcept;
    /// The watchdog renews (or, per-session, confirms) each lease on its schedule.
    bool renews() const noexcept { return cfg().watchdog && (!cfg().per_session || cfg().confirms); }
    void grant_lease(std::string token, std::string ref, std::uint64_t fence, std::uint64_t session,
                     time_point deadline, time_point now);
    bool take_grant(const grant_notice& g, time_point now);
    void mark_lost(bool gone = false);
    void drop_lease();
    void arm_lease_timer();
    void start_renew(time_point now);
    time_point renew_after(time_point base) const noexcept;
    void background_release(const std::string& token, const std::string& ref = {});
    void complete(waiter_entry& w, boost::system::error_code ec);
    void fail_all(boost::system::error_code ec);
    void end_failed_attempt(boost::system::error_code ec);
    void sleep_until(time_point at);
    std::string new_token();
    const fsm_config& cfg() const noexcept { return ctx_.cfg; }


    fsm_context& ctx_;
    std::uint64_t next_hold_ = 0;
    std::uint64_t attempts_sent_ = 0;

    boost::container::devector<waiter_entry> waiters_;  // FIFO; allocates nothing while empty (std::deque: 576 bytes)
    boost::container::small_vector<std::pair<std::uint64_t, std::uint64_t>, 1> holds_;  // (hold id, owner)
    std::uint64_t holder_ = 0;                                                          // owner of the holds

    std::optional<lease_state> lease_;
    boxed<attempt_state> attempt_;
    boxed<renew_state> renew_;
    wait_state wait_;
    std::vector<release_state> releases_;
    std::size_t background_ = 0;  // background releases in flight

    backoff_count wait_backoff_;   // bounds: backoff_min, backoff_max
    backoff_count renew_backoff_;  // bounds: backoff_min, renew_every
    int late_replies_ = 0;
    unsigned handoffs_ = 0;
    bool yield_next_ = false;   // another process asked: give the lease back at the next release
    bool yield_pause_ = false;  // pause before competing again
    bool check_now_ = false;    // renew now (hand-off budget spent)
    bool linger_ = false;       // a read lease nobody holds, kept until the next turn for a newcomer
    std::optional<time_point> timer_;
    std::vector<fsm_action> actions_;
};

}  // namespace dlock::detail
