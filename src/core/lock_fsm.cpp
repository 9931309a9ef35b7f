// SPDX-License-Identifier: BSL-1.0
#include "core/lock_fsm.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail {

using boost::system::error_code;
using act = fsm_action::type;

// A release meeting transient errors (a restart, a reload) is asked again this many times,
// with backoff up to backoff_max: with the defaults, for about 9 s or until the lease's end.
constexpr int max_release_attempts = 14;

lock_fsm::lock_fsm(fsm_context& ctx) : ctx_(ctx) {}

std::string lock_fsm::new_token()
{
    char digits[11];
    int n = 0;
    for (auto v = ++ctx_.token_seq; v != 0; v >>= 6)
        digits[n++] = token_digits[v & 63];
    std::string t = ctx_.token_prefix;
    while (n > 0)
        t += digits[--n];
    return t;
}

void lock_fsm::release_buffers() noexcept
{
    if (waiters_.empty() && waiters_.capacity() != 0)
        decltype(waiters_)().swap(waiters_);
    if (!actions_.empty())
        return;
    if (ctx_.spare_actions.capacity() < actions_.capacity())
        actions_.swap(ctx_.spare_actions);
    std::vector<fsm_action>().swap(actions_);
}

// ---- queries ----

fsm_state lock_fsm::state() const noexcept
{
    if (lease_) {
        if (lease_->lost)
            return fsm_state::lost;
        if (renew_)
            return fsm_state::renewing;
        return lease_->suspect ? fsm_state::suspect : fsm_state::held;
    }
    if (attempt_ && !attempt_->spent)
        return fsm_state::attempting;
    if (wait_.sleeping || wait_.watching)
        return wait_.queued_since ? fsm_state::queued : fsm_state::waiting;
    return fsm_state::free;
}

bool lock_fsm::idle() const noexcept
{
    return waiters_.empty() && holds_.empty() && !lease_ && in_flight() == 0 && !wait_.watching;
}

std::size_t lock_fsm::in_flight() const noexcept
{
    return (attempt_ ? 1 : 0) + (renew_ ? 1 : 0) + releases_.size() + background_;
}

time_point lock_fsm::valid_until() const noexcept
{
    return lease_ && !lease_->lost ? lease_->valid_until : time_point::min();
}

// ---- helpers ----

void lock_fsm::set_timer(time_point at)
{
    if (timer_ && *timer_ == at)
        return;
    timer_ = at;
    push({.t = act::set_timer, .at = at});
}

void lock_fsm::observe(time_point now)
{
    if (lease_ && !lease_->lost && now >= lease_->valid_until)
        mark_lost();
}

void lock_fsm::mark_lost(bool gone)
{
    if (!lease_ || lease_->lost)
        return;
    lease_->lost = true;
    lease_->gone = gone;
    ++ctx_.stats.lost;
    emit(lock_event_kind::lost, lease_->fence);
    push({.t = act::lost});
    if (timer_) {
        timer_.reset();
        push({.t = act::cancel_timer});
    }
}

void lock_fsm::drop_lease()
{
    lease_.reset();
    linger_ = false;
    check_now_ = false;
    // Requests about this lease end with it: a yield asked by a contended renewal of a lease
    // that was then lost must not send the next lease back to the store at its first release.
    yield_next_ = false;
    handoffs_ = 0;
    if (timer_) {
        timer_.reset();
        push({.t = act::cancel_timer});
    }
}

void lock_fsm::background_release(const std::string& token, const std::string& ref)
{
    ++background_;
    push({.t = act::release, .token = token, .ref = ref, .id = 0});
}

void lock_fsm::complete(waiter_entry& w, error_code ec)
{
    push({.t = act::complete_waiter, .id = w.id, .ec = ec});
}

void lock_fsm::emit(lock_event_kind kind, std::uint64_t fence)
{
    if (cfg().events)
        push({.t = act::event, .fence = fence, .kind = kind});
}

void lock_fsm::sleep_until(time_point at)
{
    wait_.sleeping = true;
    set_timer(at);
}

// The single decision point: who talks to the store next, given holds, waiters and lease.
void lock_fsm::schedule(time_point now)
{
    if (!holds_.empty())
        return;  // the local holder keeps the lease; waiters wait here
    if (waiters_.empty()) {
        // Nobody wants the name. An attempt in flight is released behind itself on the same
        // connection, so a lease it may take cannot outlive the caller's shutdown.
        if (attempt_ && !attempt_->spent) {
            attempt_->spent = true;
            background_release(attempt_->token);
            if (attempt_->token == wait_.token)
                wait_.queued_since.reset();  // that release withdraws it too
        }
        end_wait(true);
        if (lease_) {
            // A lease handed to a waiter that has gone: back to the store.
            if (!lease_->lost)
                background_release(lease_->token, lease_->ref);
            drop_lease();
        }
        if (timer_) {
            timer_.reset();
            push({.t = act::cancel_timer});
        }
        return;
    }
    if (lease_ && lease_->lost)
        drop_lease();
    if (lease_ && linger_) {
        // A lingering read lease the newcomer could not join (another process asked for the
        // name, or its time is short): give it back and ask anew.
        background_release(lease_->token, lease_->ref);
        drop_lease();
    }
    if (lease_) {
        grant_front(now);
        return;
    }
    if (attempt_ || wait_.sleeping)
        return;  // the conversation goes on; its next step serves the newcomer too
    if (std::exchange(yield_pause_, false) && cfg().yield_pause.count() > 0) {
        // Yielded a contended lease: let the other process's waiter win this round.
        sleep_until(now + std::chrono::duration_cast<clock_type::duration>(cfg().yield_pause));
        return;
    }
    start_attempt(now);
}

void lock_fsm::start_attempt(time_point now)
{
    wait_.sleeping = false;
    wait_.notified = false;
    // A direct wait keeps one token; once its grant channel is up, the store queues it.
    bool direct_wait = cfg().direct_handoff && wait_.watching;
    bool queue = direct_wait && wait_.ready;
    std::string token = direct_wait ? wait_.token : new_token();
    if (queue && !wait_.queued_since)
        wait_.queued_since = now;
    attempt_ = attempt_state{token, now, ++attempts_sent_};
    if (timer_ && !lease_) {
        timer_.reset();
        push({.t = act::cancel_timer});
    }
    push({.t = act::attempt, .token = std::move(token), .queue = queue});
}

void lock_fsm::start_watch()
{
    wait_.watching = true;
    wait_.ready = false;
    if (cfg().direct_handoff)
        wait_.token = new_token();
    push({.t = act::watch, .token = wait_.token});
}

// Ends a wait's store conversation. `withdraw`: its token may sit in the store's queue (or
// have just been handed the name): release it, which also takes it off the queue.
void lock_fsm::end_wait(bool withdraw)
{
    if (wait_.watching)
        push({.t = act::unwatch});
    if (withdraw && wait_.queued_since)
        background_release(wait_.token);
    if (timer_ && wait_.sleeping && !lease_) {
        timer_.reset();
        push({.t = act::cancel_timer});
    }
    wait_ = wait_state{};
}

// A read lease serves every local waiter at once; any other, the first.
void lock_fsm::grant_front(time_point now)
{
    grant_one(now);
    while (cfg().shared && !waiters_.empty())
        grant_one(now);
}

void lock_fsm::grant_one(time_point now)
{
    auto w = waiters_.front();
    waiters_.pop_front();
    ++ctx_.stats.acquired;
    ctx_.stats.wait.record(std::chrono::duration_cast<std::chrono::microseconds>(now - w.started));
    auto id = ++next_hold_;
    holds_.emplace_back(id, w.owner);
    holder_ = w.owner;
    emit(lock_event_kind::acquired, lease_->fence);
    push({.t = act::complete_waiter, .id = w.id, .hold = id, .fence = lease_->fence});
}

void lock_fsm::grant_lease(std::string token, std::string ref, std::uint64_t fence, std::uint64_t session,
                           time_point deadline, time_point now)
{
    lease_ = lease_state{std::move(token), std::move(ref), fence, session, deadline, renew_after(now)};
    renew_backoff_.reset();
    arm_lease_timer();
    grant_front(now);
}

// The next renewal, `renew_every` after `base`, moved up to the next grid line (if any).
time_point lock_fsm::renew_after(time_point base) const noexcept
{
    auto at = base + cfg().renew_every;
    auto grid = std::chrono::duration_cast<clock_type::duration>(cfg().renew_grid);
    if (grid.count() <= 0)
        return at;
    auto off = at.time_since_epoch() % grid;
    return off.count() == 0 ? at : at + (grid - off);
}

void lock_fsm::start_renew(time_point now)
{
    check_now_ = false;
    renew_ = renew_state{lease_->token, now};
    push({.t = act::renew, .token = lease_->token, .ref = lease_->ref});
}

// The watchdog's one timer: the next renewal, or the lease's end when nothing renews it
// (no watchdog, a renewal in flight, or a per-session store).
void lock_fsm::arm_lease_timer()
{
    if (!lease_ || lease_->lost)
        return;
    auto at = lease_->valid_until;
    if (renews() && !renew_)
        at = std::min(at, check_now_ ? time_point::min() : lease_->next_renew);
    // A lingering read lease goes back at the next turn, whatever re-arms the timer meanwhile
    // (a renewal's reply would otherwise keep it a third of a lease).
    if (linger_)
        at = time_point::min();
    set_timer(at);
}

// A direct hand-off: the store set our lease at the release, after our first queued attempt
// was sent, so that send time bounds the lease's start from below. False: the bound leaves
// too little (a long wait, or a fixed lease that owes a full term): confirm by an attempt.
bool lock_fsm::take_grant(const grant_notice& g, time_point now)
{
    if (!wait_.queued_since)
        return false;
    // A per-session lease follows its session's events (on_session): one handed without its
    // session would never be extended and was lost after one lease (issue 29). Confirm it.
    if (cfg().per_session && g.session == 0)
        return false;
    auto deadline = *wait_.queued_since + g.ttl - cfg().drift;
    if (!cfg().watchdog || deadline - now < g.ttl / 2)
        return false;
    ++ctx_.stats.store_handoffs;
    if (attempt_)
        attempt_->spent = true;  // the same token: its reply can add nothing
    auto token = std::move(wait_.token);
    wait_.queued_since.reset();
    end_wait(false);
    grant_lease(std::move(token), g.lease_ref, g.fencing_token, g.session, deadline, now);
    return true;
}

void lock_fsm::fail_all(error_code ec)
{
    auto ws = std::move(waiters_);
    waiters_.clear();
    end_wait(true);
    for (auto& w : ws)
        complete(w, ec);
}

// After a failed attempt: callers that asked for one attempt (or whose bound passed) and
// have now seen one get their answer.
void lock_fsm::end_failed_attempt(error_code ec)
{
    for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->attempted && (it->try_once || it->expired)) {
            auto w = *it;
            it = waiters_.erase(it);
            if (w.expired)
                ++ctx_.stats.cancelled;
            complete(w, w.expired ? error_code(error::timeout) : ec);
        } else {
            ++it;
        }
    }
}

void lock_fsm::spend_local_turn(time_point now)
{
    if (++handoffs_ < cfg().handoff_budget)
        return;
    // Budget spent: renew now and learn whether another process waits meanwhile (at once,
    // not through the timer: no wake-up of its own on the hot path).
    handoffs_ = 0;
    if (!renew_ && renews())
        start_renew(now);
    else
        check_now_ = true;  // right after the renewal in flight
    arm_lease_timer();
}

// A newcomer may share the read lease held here: nobody queued before it, no other process
// asked for the name since the last check, and the lease has time left.
bool lock_fsm::joinable(time_point now) const noexcept
{
    return cfg().shared && lease_ && !lease_->lost && waiters_.empty() && !yield_next_ && cfg().watchdog &&
           cfg().handoff_budget > 0 && now + cfg().drift < lease_->valid_until;
}

// ---- inputs ----

void lock_fsm::on_acquire(std::uint64_t waiter, std::uint64_t owner, bool try_once, time_point now)
{
    observe(now);
    waiter_entry w{waiter, owner, try_once, attempts_sent_, now};
    // Re-entry: the same owner gets another hold at once (a reader too, even if another
    // process waits: it must not wait behind a writer that waits for it).
    bool reentry = !holds_.empty() &&
                   (holder_ == owner || (cfg().shared && std::any_of(holds_.begin(), holds_.end(),
                                                                     [&](auto& h) { return h.second == owner; })));
    if (reentry) {
        if (lease_ && lease_->lost)
            return complete(w, error::lock_lost);
        ++ctx_.stats.reentered;
        ++ctx_.stats.acquired;
        auto id = ++next_hold_;
        holds_.emplace_back(id, owner);
        push({.t = act::complete_waiter, .id = waiter, .hold = id, .fence = lease_ ? lease_->fence : 0});
        return;
    }
    if (joinable(now)) {
        linger_ = false;  // a lingering lease found its newcomer
        ++ctx_.stats.handed_off;
        waiters_.push_back(w);
        grant_one(now);
        return spend_local_turn(now);
    }
    // One attempt means no local waiting either: held here by someone else is "held".
    if (try_once && (!holds_.empty() || !waiters_.empty()))
        return complete(w, {});
    waiters_.push_back(w);
    schedule(now);
}

void lock_fsm::on_cancel(std::uint64_t waiter, error_code why, time_point now)
{
    observe(now);
    auto it = std::find_if(waiters_.begin(), waiters_.end(), [&](auto& w) { return w.id == waiter; });
    if (it == waiters_.end())
        return;
    auto w = *it;
    waiters_.erase(it);
    ++ctx_.stats.cancelled;
    // First the store's side (withdraw, release), then the caller: it may close the store.
    schedule(now);
    complete(w, why);
}

void lock_fsm::on_deadline(std::uint64_t waiter, time_point now)
{
    observe(now);
    auto it = std::find_if(waiters_.begin(), waiters_.end(), [&](auto& w) { return w.id == waiter; });
    if (it == waiters_.end())
        return;
    // Held here by another owner, or one attempt already said no: the bound is final.
    if (it->attempted || !holds_.empty())
        return on_cancel(waiter, error::timeout, now);
    // Else it gets one attempt first (a zero or sub-round-trip bound still tries).
    it->expired = true;
    if (wait_.sleeping)
        start_attempt(now);
}

void lock_fsm::on_attempt_done(error_code ec, const acquire_result& res, time_point now)
{
    if (!attempt_)
        return;
    observe(now);
    auto a = std::move(*attempt_);
    attempt_.reset();
    for (auto& w : waiters_)
        if (a.seq > w.seen_from)
            w.attempted = true;
    if (a.spent) {
        // Released when its waiters left, or superseded by a grant to the same token.
        if (ec)
            ++ctx_.stats.store_errors;
        return schedule(now);
    }
    if (lease_) {
        // Cannot happen unless a grant came meanwhile (then the attempt was spent); be safe.
        if (!ec && res.acquired && a.token != lease_->token)
            background_release(a.token);
        return schedule(now);
    }
    if (ec) {
        ++ctx_.stats.store_errors;
        if (!is_transient(ec)) {
            // Refused permission, wrong type, bad lease...: retrying cannot help.
            return fail_all(ec);
        }
        // It may have taken the lease before failing: give that back. A wait's token is
        // then spent (a hand-off to it still on its way would be a lease we cannot trust).
        background_release(a.token);
        if (a.token == wait_.token) {
            wait_.queued_since.reset();
            end_wait(false);
        }
        end_failed_attempt(ec);
        if (waiters_.empty())
            return schedule(now);
        return sleep_until(now + wait_backoff_.next(cfg().backoff_min, cfg().backoff_max, ctx_.rng));
    }
    if (res.acquired) {
        wait_backoff_.reset();
        auto granted = res.granted_ttl.count() > 0 ? res.granted_ttl : cfg().lease;
        auto deadline = a.sent + granted - cfg().drift;
        if (now >= deadline) {
            // The reply came after the lease's local end: it is not a lock.
            ++ctx_.stats.late_replies;
            background_release(a.token);
            if (a.token == wait_.token) {
                wait_.queued_since.reset();
                end_wait(false);
            }
            if (++late_replies_ >= 3)
                return fail_all(error::invalid_lease);
            return waiters_.empty() ? schedule(now) : start_attempt(now);
        }
        late_replies_ = 0;
        if (waiters_.empty()) {
            background_release(a.token, res.lease_ref);
            return end_wait(false);
        }
        end_wait(false);  // the token holds the name now: nothing queued to withdraw
        return grant_lease(std::move(a.token), res.lease_ref, res.fencing_token, res.session, deadline, now);
    }
    ++ctx_.stats.contended;
    end_failed_attempt({});
    if (waiters_.empty())
        return schedule(now);
    // A grant that came during the attempt, or a bound that passed: try again now.
    bool again = wait_.notified || std::any_of(waiters_.begin(), waiters_.end(), [](auto& w) { return w.expired; });
    if (wait_.grant) {
        auto g = *std::exchange(wait_.grant, std::nullopt);
        if (take_grant(g, now))
            return;
        again = true;  // confirm it: the token holds the name, so the attempt succeeds
    }
    if (!wait_.watching) {
        // Subscribe before the next attempt: a release from now on cannot go unseen.
        start_watch();
        auto bound = res.holder_ttl.count() >= 0
                         ? std::min(res.holder_ttl + milliseconds(1), cfg().backoff_max)
                         : equal_jitter(wait_backoff_.step(cfg().backoff_min, cfg().backoff_max), ctx_.rng);
        return sleep_until(now + bound);  // woken at once by `ready`
    }
    if (again)
        return start_attempt(now);
    // +1 ms: the store's remaining-lease figure rounds down.
    if (res.holder_ttl.count() >= 0)
        return sleep_until(now + res.holder_ttl + milliseconds(1));
    // Queued in a store whose own queue wakes us (etcd, ZooKeeper: a grant, or a resync
    // when our place is gone): the timer is only a safety net, one lease away, not a poll.
    if (cfg().inherent_queue && wait_.queued_since)
        return sleep_until(now + std::max(cfg().lease, cfg().backoff_max));
    sleep_until(now + wait_backoff_.next(cfg().backoff_min, cfg().backoff_max, ctx_.rng));
}

void lock_fsm::on_watch(watch_event ev, const grant_notice& g, time_point now)
{
    observe(now);
    if (!wait_.watching)
        return;
    if (ev == watch_event::granted) {
        if (wait_.sleeping) {
            ++ctx_.stats.woken_by_notification;  // a grant is a notification too
            if (take_grant(g, now))
                return;
            return start_attempt(now);  // confirm it
        }
        if (attempt_ && take_grant(g, now))
            return;
        wait_.grant = g;  // decided when the attempt in flight answers
        wait_.notified = true;
        return;
    }
    if (ev == watch_event::ready)
        wait_.ready = true;
    if (!wait_.sleeping) {
        wait_.notified = true;  // the attempt in flight may have run before this
        return;
    }
    if (ev != watch_event::ready)
        ++ctx_.stats.woken_by_notification;
    start_attempt(now);
}

void lock_fsm::on_timer(time_point now)
{
    if (!timer_ || now < *timer_)
        return;  // re-armed since: a stale expiry
    timer_.reset();
    observe(now);
    if (lease_) {
        if (lease_->lost)
            return schedule(now);
        if (std::exchange(linger_, false) && holds_.empty() && waiters_.empty()) {
            background_release(lease_->token, lease_->ref);
            return drop_lease();
        }
        bool due = check_now_ || now >= lease_->next_renew;
        if (renews() && !renew_ && due)
            start_renew(now);
        return arm_lease_timer();
    }
    if (!wait_.sleeping)
        return;
    if (wait_.ready)
        ++ctx_.stats.woken_by_timer;
    wait_.sleeping = false;
    if (waiters_.empty())
        return schedule(now);
    start_attempt(now);
}

void lock_fsm::on_renew_done(error_code ec, const renew_result& res, time_point now)
{
    if (!renew_)
        return;
    auto r = std::move(*renew_);
    renew_.reset();
    observe(now);
    if (!lease_ || lease_->lost || lease_->token != r.token) {
        // Released or lost meanwhile. A newer lease taken while this renewal was in flight
        // armed only its end (arm_lease_timer waits while a renewal runs): arm its renewal
        // now, or it would be lost at its end without ever being renewed.
        arm_lease_timer();
        return;
    }
    if (ec) {
        ++ctx_.stats.store_errors;
        if (!lease_->suspect) {
            lease_->suspect = true;
            ++ctx_.stats.suspect;
            emit(lock_event_kind::suspect, lease_->fence);
        }
        lease_->next_renew = now + renew_backoff_.next(cfg().backoff_min, cfg().renew_every, ctx_.rng);
        return arm_lease_timer();
    }
    if (!res.owned) {
        mark_lost(true);
        return schedule(now);
    }
    renew_backoff_.reset();
    if (!cfg().per_session)
        lease_->valid_until = r.sent + cfg().lease - cfg().drift;  // a session's events move it
    lease_->suspect = false;
    lease_->next_renew = renew_after(r.sent);
    ++ctx_.stats.renewals;
    emit(lock_event_kind::renewed, lease_->fence);
    if (res.contended)
        yield_next_ = true;
    arm_lease_timer();
}

void lock_fsm::on_forced(time_point now)
{
    if (!lease_ || lease_->lost)
        return;
    yield_next_ = true;  // as if another process asked: the next release goes to the store
    if (renews() && !renew_)
        start_renew(now);
    else
        check_now_ = true;
    arm_lease_timer();
}

void lock_fsm::on_release(std::uint64_t hold, std::uint64_t release_id, time_point now)
{
    // A lease that ran out during a pause is counted lost before the release says so.
    observe(now);
    auto it = std::find_if(holds_.begin(), holds_.end(), [&](auto& h) { return h.first == hold; });
    if (it != holds_.end())
        holds_.erase(it);
    ++ctx_.stats.released;
    bool lost = !lease_ || lease_->lost;
    if (!holds_.empty()) {  // an inner re-entrant hold: the lease stays
        push({.t = act::complete_release, .id = release_id, .ec = lost ? error_code(error::lock_lost) : error_code()});
        return;
    }
    holder_ = 0;
    if (lost) {
        // Lost here by its local end is not always gone there (a paused process, a session
        // that lives on): delete it if still ours, or the name stays held until it expires.
        if (lease_ && !lease_->gone)
            background_release(lease_->token, lease_->ref);
        drop_lease();
        push({.t = act::complete_release, .id = release_id, .ec = error::lock_lost});
        return schedule(now);
    }
    emit(lock_event_kind::released, lease_->fence);
    if (cfg().shared && waiters_.empty() && !yield_next_ && cfg().watchdog && cfg().handoff_budget > 0 &&
        now + cfg().drift < lease_->valid_until) {
        // The last reader left: keep the read lease until the next turn, for a reader that
        // comes right back (a loop's next acquire), rather than give it back and ask again.
        linger_ = true;
        push({.t = act::complete_release, .id = release_id});
        return set_timer(now);
    }
    // Hand the lease to the next local waiter, unless another process asked for it or the
    // lease is fixed (a fixed lease must give each holder its full term).
    bool hand_off = !waiters_.empty() && cfg().watchdog && cfg().handoff_budget > 0 && !yield_next_ &&
                    now + cfg().drift < lease_->valid_until;
    if (hand_off) {
        ++ctx_.stats.handed_off;
        spend_local_turn(now);
        push({.t = act::complete_release, .id = release_id});
        return grant_front(now);
    }
    if (yield_next_ && !waiters_.empty()) {
        ++ctx_.stats.yielded;
        yield_pause_ = true;
    }
    yield_next_ = false;
    handoffs_ = 0;
    if (release_id == 0) {
        // Nobody waits for the outcome: a background release. In releases_ under id 0 it was
        // never found again (the driver answers id 0 as a background release), so it stayed
        // in flight for good and the machine never became idle.
        background_release(lease_->token, lease_->ref);
    } else {
        releases_.push_back({release_id, lease_->token, lease_->ref, lease_->fence, lease_->valid_until, 0});
        push({.t = act::release, .token = lease_->token, .ref = lease_->ref, .id = release_id});
    }
    drop_lease();
    // The next local waiter's attempt goes right behind the release on the same connection.
    schedule(now);
}

void lock_fsm::on_release_done(std::uint64_t release_id, error_code ec, bool owned, time_point now)
{
    if (release_id == 0) {
        if (background_ > 0)
            --background_;
        if (ec)
            ++ctx_.stats.store_errors;
        return;
    }
    auto it = std::find_if(releases_.begin(), releases_.end(), [&](auto& r) { return r.id == release_id; });
    if (it == releases_.end())
        return;
    if (ec) {
        ++ctx_.stats.store_errors;
        // A transient failure (connection lost, server loading, no majority): ask again,
        // with backoff, while the lease could still be ours; asking again is safe.
        if (is_transient(ec) && now < it->deadline && it->attempt < max_release_attempts) {
            ++it->attempt;
            auto delay = equal_jitter(std::min(cfg().backoff_min * (1 << it->attempt), cfg().backoff_max), ctx_.rng);
            push({.t = act::release, .token = it->token, .ref = it->ref, .id = release_id, .at = now + delay});
            return;
        }
    } else if (!owned && it->attempt == 0 && now < it->deadline) {
        // Gone at the store while it was still ours here: taken or dropped before we let go.
        // Counted here once: the watchdog stopped watching this lease at release().
        ec = error::lock_lost;
        ++ctx_.stats.lost;
        emit(lock_event_kind::lost, it->fence);
    }
    // !owned after a retry: most likely the first try did delete it. !owned in a reply that
    // came after the lease's local end: release() was called while the lease was valid (else
    // on_release said lock_lost), so it may simply have expired meanwhile. No lock_lost.
    releases_.erase(it);
    push({.t = act::complete_release, .id = release_id, .ec = ec});
}

void lock_fsm::on_session(session_event ev, const session_info& info, time_point now)
{
    observe(now);
    if (!lease_ || lease_->lost || lease_->session != info.generation)
        return;
    switch (ev) {
    case session_event::suspect:
        if (!lease_->suspect) {
            lease_->suspect = true;
            ++ctx_.stats.suspect;
            emit(lock_event_kind::suspect, lease_->fence);
        }
        break;
    case session_event::up:
    case session_event::restored:
        lease_->suspect = false;
        lease_->valid_until = info.valid_until;
        arm_lease_timer();
        break;
    case session_event::lost:
        mark_lost(true);
        schedule(now);
        break;
    }
}

}  // namespace dlock::detail
