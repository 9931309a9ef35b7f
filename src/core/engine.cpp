#include "core/engine.hpp"

#include <dlock/error.hpp>

#include "common/post_completion.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <unistd.h>

namespace dlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using namespace asio::experimental::awaitable_operators;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// ---- registry_state ----

registry_state::registry_state(store& s, lock_config c)
    : st(s), store_alive(s.lifetime()), cfg(std::move(c)), config_error(validate_config(cfg)), drift(effective_drift(cfg)),
      renew_every(effective_renew_interval(cfg)), rng(std::random_device{}())
{
    static constexpr char hex[] = "0123456789abcdef";
    std::random_device rd;
    client_id.reserve(24);
    for (int i = 0; i < 16; ++i)
        client_id += hex[rd() & 15];
    client_id += ':' + std::to_string(::getpid()) + ':';
}

void registry_state::emit(lock_event_kind kind, const std::string& name, std::uint64_t fence)
{
    if (cfg.on_event)
        cfg.on_event(lock_event{kind, name, fence});
}

// ---- engine ----

engine::engine(std::shared_ptr<registry_state> reg, std::string name)
    : reg_(std::move(reg)), name_(std::move(name)), ex_(reg_->st.get_executor()), direct_(reg_->st.traits().direct_handoff),
      wake_(ex_), dog_(ex_)
{
    store_name_ = reg_->cfg.prefix.empty() ? name_ : reg_->cfg.prefix + ":" + name_;
}

engine::~engine()
{
    stop_watch();
    auto it = reg_->engines.find(name_);
    if (it != reg_->engines.end() && it->second == this)
        reg_->engines.erase(it);
}

void engine::acquire(std::uint64_t owner, bool try_once, std::optional<milliseconds> limit,
                     asio::any_completion_handler<lock::acquire_signature> h)
{
    auto& r = *reg_;
    error_code ec = r.config_error ? r.config_error : validate_name(r.cfg, name_);
    if (ec)
        return post_completion(ex_, std::move(h), ec, guard());

    // Re-entry: the same owner gets another hold at once.
    if (!holds_.empty() && holder_ == owner) {
        if (lease_ && lease_->lost)
            return post_completion(ex_, std::move(h), error_code(error::lock_lost), guard());
        ++r.stats.reentered;
        ++r.stats.acquired;
        return post_completion(ex_, std::move(h), error_code(), guard(new_hold(owner)));
    }
    // One attempt means no local waiting either: held here by someone else is "held".
    if (try_once && (!holds_.empty() || !queue_.empty()))
        return post_completion(ex_, std::move(h), error_code(), guard());

    auto w = std::make_shared<waiter>();
    w->owner = owner;
    w->try_once = try_once;
    w->started = clock_type::now();
    w->slot = asio::get_associated_cancellation_slot(h);
    assign_handler(w->handler, std::move(h));
    std::weak_ptr<engine> weak = shared_from_this();
    std::weak_ptr<waiter> ww = w;
    if (limit) {
        w->timer.emplace(ex_, *limit);
        w->timer->async_wait([weak, ww](error_code ec) {
            auto self = weak.lock();
            auto w = ww.lock();
            if (!ec && self && w)
                self->remove_waiter(w, error::timeout);
        });
    }
    if (w->slot.is_connected()) {
        w->slot.assign([weak, ww](asio::cancellation_type) {
            auto self = weak.lock();
            auto w = ww.lock();
            if (self && w)
                self->remove_waiter(w, asio::error::operation_aborted);
        });
    }
    queue_.push_back(std::move(w));
    pump();
}

void engine::finish_waiter(waiter& w, error_code ec, guard g)
{
    w.done = true;
    if (w.timer)
        w.timer->cancel();
    if (w.slot.is_connected())
        w.slot.clear();
    // From a store callback the caller is not on the stack: no need for a post (and its
    // extra pass through the reactor). From an acquire() call, post as Asio requires.
    if (in_io_) {
        // Once only: calls the resumed caller makes into this engine are its own and post.
        in_io_ = false;
        asio::dispatch(ex_, asio::append(std::move(w.handler), ec, std::move(g)));
    } else
        post_completion(ex_, std::move(w.handler), ec, std::move(g));
}

void engine::remove_waiter(const std::shared_ptr<waiter>& w, error_code ec)
{
    if (w->done)
        return;
    std::erase(queue_, w);
    ++reg_->stats.cancelled;
    // pump() first: a withdrawal from the store's queue is written before the caller runs
    // again (and perhaps closes the store).
    pump();
    finish_waiter(*w, ec, guard());
}

void engine::complete_try_waiters(error_code ec)
{
    for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->try_once) {
            auto w = *it;
            it = queue_.erase(it);
            finish_waiter(*w, ec, guard());
        } else {
            ++it;
        }
    }
}

void engine::fail_waiters(error_code ec)
{
    auto q = std::move(queue_);
    queue_.clear();
    for (auto& w : q)
        finish_waiter(*w, ec, guard());
}

std::shared_ptr<hold> engine::new_hold(std::uint64_t owner)
{
    auto h = std::make_shared<hold>();
    h->eng = shared_from_this();
    h->owner = owner;
    h->fence = lease_ ? lease_->fence : 0;
    h->granted = clock_type::now();
    holds_.push_back(h.get());
    holder_ = owner;
    return h;
}

// The scheduler: called whenever the local holder, the queue or the lease changes.
void engine::pump()
{
    if (!holds_.empty())
        return;
    if (queue_.empty()) {
        if (driving_) {
            // Withdraw a queued token now rather than when the driver next runs. An attempt
            // with it still in flight ran before the withdrawal, so its grant is void.
            if (direct_ && queued_since_) {
                spent_token_ = wait_token_;
                end_wait(true);
            }
            wake_.cancel();  // the driver sees no waiter and stops
        }
        else if (lease_) {
            // A handed-off lease whose waiter went away: back to the store.
            auto token = std::move(lease_->token);
            bool lost = lease_->lost;
            lease_.reset();
            dog_.cancel();
            if (!lost)
                background_release(std::move(token));
        }
        return;
    }
    if (lease_ && lease_->lost) {
        lease_.reset();
        dog_.cancel();
    }
    if (lease_) {
        grant();
        return;
    }
    if (!driving_)
        start_driver();
}

// The first attempt is a plain callback: an uncontended acquire costs one round trip and
// no coroutine. Only when it must wait does the driver coroutine take over.
void engine::start_driver()
{
    driving_ = true;
    ++driver_gen_;
    late_replies_ = 0;
    if (std::exchange(yield_pause_, false) && reg_->cfg.yield_pause.count() > 0) {
        asio::co_spawn(ex_, drive(shared_from_this(), next_step::pause, {}), asio::detached);
        return;
    }
    auto token = reg_->new_token();
    auto sent = clock_type::now();
    notified_ = false;
    reg_->st.async_try_acquire(
        store_name_, token, reg_->cfg.lease,
        [self = shared_from_this(), token, sent](error_code ec, acquire_result res) mutable {
            self->in_io_ = true;
            auto step = self->on_attempt(token, sent, ec, res);
            self->in_io_ = false;
            if (step != next_step::granted && step != next_step::stop)
                asio::co_spawn(self->ex_, drive(self, step, res), asio::detached);
        });
}

// One attempt's outcome; shared by the fast path and the driver loop.
engine::next_step engine::on_attempt(std::string& token, clock_type::time_point sent, error_code ec,
                                     const acquire_result& res)
{
    auto& r = *reg_;
    auto stop = [this] {
        end_wait(true);
        driving_ = false;
        if (has_waiters())
            pump();
        return next_step::stop;
    };
    if (ec) {
        ++r.stats.store_errors;
        // The attempt may have taken the lease before the failure: drop it.
        drop_token(token);
        // One attempt was asked for, and the store could not answer it: say why.
        complete_try_waiters(ec);
        return has_waiters() ? next_step::backoff : stop();
    }
    if (res.acquired && !spent_token_.empty() && token == spent_token_) {
        // Withdrawn while this attempt was in flight: the withdrawal released it.
        drop_token(token);
        return has_waiters() ? next_step::retry : stop();
    }
    if (res.acquired) {
        auto deadline = lease_deadline(sent, r.cfg.lease, r.drift);
        if (clock_type::now() >= deadline) {
            // The reply came after the lease's local end: it is not a lock.
            ++r.stats.late_replies;
            drop_token(token);
            if (++late_replies_ >= 3) {
                fail_waiters(error::invalid_lease);
                return stop();
            }
            return has_waiters() ? next_step::retry : stop();
        }
        if (!has_waiters()) {
            drop_token(token);
            return stop();
        }
        lease_ = lease_state{std::move(token), res.fencing_token, deadline};
        end_wait(false);  // the token holds the name now: nothing queued to withdraw
        driving_ = false;
        arm_watchdog();
        pump();
        return next_step::granted;
    }
    ++r.stats.contended;
    complete_try_waiters();
    return has_waiters() ? next_step::wait : stop();
}

// The watchdog costs nothing until its first renewal is due: a timer, then a coroutine.
void engine::arm_watchdog()
{
    auto& r = *reg_;
    dog_.expires_at(r.cfg.watchdog ? std::min(clock_type::now() + r.renew_every, lease_->valid_until)
                                   : lease_->valid_until);
    dog_.async_wait([self = shared_from_this(), token = lease_->token](error_code) {
        auto& l = self->lease_;
        if (!l || l->token != token || l->lost || l->dog_running)
            return;
        // Due, or asked for an early renewal (check_now_); a mere stop left the lease gone.
        if (clock_type::now() >= self->dog_.expiry() || self->check_now_) {
            l->dog_running = true;
            asio::co_spawn(self->ex_, watchdog(self, token), asio::detached);
        }
    });
}

void engine::grant()
{
    auto w = std::move(queue_.front());
    queue_.pop_front();
    auto& r = *reg_;
    ++r.stats.acquired;
    r.stats.wait.record(std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - w->started));
    auto h = new_hold(w->owner);
    r.emit(lock_event_kind::acquired, name_, h->fence);
    finish_waiter(*w, {}, guard(std::move(h)));
}

void engine::release(const std::shared_ptr<hold>& h, asio::any_completion_handler<void(error_code)> done,
                     bool by_destructor)
{
    auto& r = *reg_;
    auto finish = [this, &done](error_code ec) {
        if (done)
            post_completion(ex_, std::move(done), ec);
    };
    if (!h->active)
        return finish(error::not_held);
    h->active = false;
    std::erase(holds_, h.get());
    if (reg_->store_alive.expired())
        return;  // a guard freed with the io_context after its store: the lease ends by itself
    ++r.stats.released;
    if (by_destructor)
        ++r.stats.released_by_destructor;
    r.stats.hold.record(std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - h->granted));
    if (h->lost_waiter) {
        auto w = std::move(h->lost_waiter);
        post_completion(ex_, std::move(*w), error_code(asio::error::operation_aborted));
    }
    bool lost = !lease_ || lease_->lost;
    if (!holds_.empty())  // an inner re-entrant hold: the lease stays
        return finish(lost ? error_code(error::lock_lost) : error_code());
    holder_ = 0;
    if (lost) {
        lease_.reset();
        dog_.cancel();
        finish(error::lock_lost);
        pump();
        return;
    }
    r.emit(lock_event_kind::released, name_, lease_->fence);
    // Hand the lease to the next local waiter, unless another process asked for it or the
    // lease is fixed (a fixed lease must give each holder its full term).
    bool can_hand_off = !queue_.empty() && r.cfg.watchdog && r.cfg.handoff_budget > 0 && !yield_next_ &&
                        clock_type::now() + r.drift < lease_->valid_until;
    if (can_hand_off) {
        ++r.stats.handed_off;
        if (++handoffs_ >= r.cfg.handoff_budget) {
            // Budget spent: renew now and learn whether another process waits meanwhile.
            handoffs_ = 0;
            check_now_ = true;
            dog_.cancel();
        }
        finish({});
        pump();
        return;
    }
    if (yield_next_ && !queue_.empty()) {
        ++r.stats.yielded;
        yield_pause_ = true;
    }
    yield_next_ = false;
    handoffs_ = 0;
    auto token = std::move(lease_->token);
    lease_.reset();
    dog_.cancel();
    store_release(std::move(token), std::move(done), 0);
    // The next local waiter's attempt is pipelined behind this release on the same store
    // connection, so it need not wait for the reply.
    pump();
}

// Releases at the store, retrying a release whose reply was lost: after such a retry,
// "not ours" most likely means the first attempt did delete it, so it is no lock_lost.
void engine::store_release(std::string token, asio::any_completion_handler<void(error_code)> done, int attempt)
{
    auto& r = *reg_;
    r.st.async_release(
        store_name_, token,
        [self = shared_from_this(), token, attempt, done = std::move(done)](error_code ec, bool owned) mutable {
            // no_quorum (Redlock): part of the release may have landed; asking again is safe.
            bool transient = ec == error::connection_lost || ec == error::timeout || ec == error::no_quorum;
            if (transient && attempt < 2) {
                ++self->reg_->stats.store_errors;
                return self->store_release(std::move(token), std::move(done), attempt + 1);
            }
            if (ec)
                ++self->reg_->stats.store_errors;
            else if (!owned && attempt == 0)
                ec = error::lock_lost;  // expired or taken before we let go
            if (done)  // a store callback: the caller is not on the stack
                asio::dispatch(self->ex_, asio::append(std::move(done), ec));
        });
}

void engine::wait_lost(const std::shared_ptr<hold>& h, asio::any_completion_handler<void(error_code)> done)
{
    if (!h->active)
        return post_completion(ex_, std::move(done), error_code(error::not_held));
    if (is_lost(*h))
        return post_completion(ex_, std::move(done), error_code(error::lock_lost));
    if (h->lost_waiter)
        return post_completion(ex_, std::move(done), error_code(error::invalid_request));
    auto slot = asio::get_associated_cancellation_slot(done);
    h->lost_waiter = std::make_unique<asio::any_completion_handler<void(error_code)>>(std::move(done));
    if (slot.is_connected()) {
        std::weak_ptr<hold> wh = h;
        slot.assign([wh, ex = ex_](asio::cancellation_type) {
            auto h = wh.lock();
            if (!h || !h->lost_waiter)
                return;
            auto w = std::move(h->lost_waiter);
            post_completion(ex, std::move(*w), error_code(asio::error::operation_aborted));
        });
    }
}

clock_type::time_point engine::valid_until(const hold& h) const noexcept
{
    if (!h.active || !lease_ || lease_->lost)
        return clock_type::time_point::min();
    return lease_->valid_until;
}

bool engine::is_lost(const hold& h) const noexcept { return h.active && (!lease_ || lease_->lost); }

void engine::mark_lost()
{
    if (!lease_ || lease_->lost)
        return;
    auto& r = *reg_;
    lease_->lost = true;
    ++r.stats.lost;
    r.emit(lock_event_kind::lost, name_, lease_->fence);
    auto holds = holds_;  // a cancellation handler may release its guard
    for (hold* h : holds) {
        if (h->lost_waiter) {
            auto w = std::move(h->lost_waiter);
            post_completion(ex_, std::move(*w), error_code(error::lock_lost));
        }
        h->lost.emit(asio::cancellation_type::terminal);
    }
    if (holds_.empty())
        pump();
}

void engine::background_release(std::string token)
{
    reg_->st.async_release(store_name_, token, [self = shared_from_this()](error_code ec, bool) {
        if (ec)
            ++self->reg_->stats.store_errors;
    });
}

void engine::start_watch()
{
    if (watch_)
        return;
    watch_ready_ = false;
    std::weak_ptr<engine> weak = shared_from_this();
    auto gen = ++watch_gen_;
    if (direct_) {
        // One token for the whole wait: the store queues it and may hand the name to it.
        wait_token_ = reg_->new_token();
        watch_ = reg_->st.watch(store_name_, wait_token_, [weak, gen](watch_event ev, const grant_notice& g) {
            auto self = weak.lock();
            // A stopped watch's late callback must not hand a spent token's grant to a new wait.
            if (!self || !self->watch_ || self->watch_gen_ != gen)
                return;
            if (ev == watch_event::granted) {
                // The driver sleeps: take the name here and let the waiter run inside this
                // callback, without waking the driver first (its next pass ends it).
                if (self->sleeping_gen_ != 0 && self->sleeping_gen_ == self->driver_gen_ && self->has_waiters() &&
                    !self->grant_) {
                    self->in_io_ = true;
                    bool took = self->take_grant(g);
                    self->in_io_ = false;
                    if (took)
                        return;
                }
                self->grant_ = g;
            } else
                self->watch_ready_ = true;
            self->notified_ = true;
            self->wake_.cancel();
        });
        return;
    }
    watch_ = reg_->st.watch(store_name_, [weak, gen](watch_event ev) {
        auto self = weak.lock();
        if (!self || !self->watch_ || self->watch_gen_ != gen)
            return;
        if (ev != watch_event::released)
            self->watch_ready_ = true;
        self->notified_ = true;
        self->wake_.cancel();
    });
}

void engine::stop_watch()
{
    if (watch_) {
        // Posted: the unsubscribe's write waits until a just-woken waiter has run. Its late
        // callbacks meanwhile are ignored (watch_gen_).
        asio::post(ex_, [alive = reg_->store_alive, st = &reg_->st, id = *watch_] {
            if (!alive.expired())  // an engine freed with the io_context may outlive its store
                st->unwatch(id);
        });
        watch_.reset();
        watch_ready_ = false;
    }
}

// Ends a wait's store conversation. `withdraw`: its token may sit in the store's queue (or
// may just have been handed the name): release it, which also takes it off the queue.
void engine::end_wait(bool withdraw)
{
    stop_watch();
    if (withdraw && queued_since_)
        background_release(wait_token_);
    wait_token_.clear();
    queued_since_.reset();
    grant_.reset();
}

// Gives up a token whose attempt failed or came too late; a wait's token is then spent, so
// a hand-off to it that is still on its way is ignored rather than trusted.
void engine::drop_token(const std::string& token)
{
    background_release(token);
    if (direct_ && !wait_token_.empty() && token == wait_token_) {
        queued_since_.reset();  // released above: nothing left to withdraw
        end_wait(false);
    }
}

// A direct hand-off: the store set our lease when the holder released, some time after our
// first queued attempt was sent, so that send time bounds the lease's start from below.
// False: the bound leaves too little (a long wait, or a fixed lease that owes a full term):
// confirm with an attempt instead, which refreshes the lease.
bool engine::take_grant(const grant_notice& g)
{
    auto& r = *reg_;
    if (!queued_since_)
        return false;
    auto deadline = lease_deadline(*queued_since_, g.ttl, r.drift);
    if (!r.cfg.watchdog || deadline - clock_type::now() < g.ttl / 2)
        return false;
    ++r.stats.store_handoffs;
    lease_ = lease_state{std::move(wait_token_), g.fencing_token, deadline};
    driving_ = false;
    ++driver_gen_;
    wake_.cancel();  // a sleeping driver wakes, finds itself superseded, and ends
    arm_watchdog();
    end_wait(false);  // its unsubscribe is posted: written after the waiter has run
    pump();           // last: the waiter may run inline (from a store callback)
    return true;
}

// Sleeps until `deadline` or a notification; true if a notification woke it.
asio::awaitable<bool> engine::wait_until(clock_type::time_point deadline)
{
    if (!notified_) {
        wake_.expires_at(deadline);
        const auto gen = driver_gen_;
        sleeping_gen_ = gen;
        co_await wake_.async_wait(use_tuple);
        if (sleeping_gen_ == gen)
            sleeping_gen_ = 0;
    }
    co_return notified_;
}

// Competes for the name at the store on behalf of the local queue, until it wins or no
// waiter is left: waits for a release notification, the holder's lease end, or a backoff.
asio::awaitable<void> engine::drive(std::shared_ptr<engine> self, next_step step, acquire_result last)
{
    auto& e = *self;
    auto& r = *e.reg_;
    auto backoff = r.cfg.backoff_min;
    const auto gen = e.driver_gen_;
    for (;;) {
        switch (step) {
        case next_step::granted:
        case next_step::stop: co_return;
        case next_step::retry: break;
        case next_step::pause:
            // Yielded a contended lease: let the other process's waiter win this round.
            e.notified_ = false;
            co_await e.wait_until(clock_type::now() + r.cfg.yield_pause);
            if (gen != e.driver_gen_)
                co_return;
            break;
        case next_step::backoff:
            co_await e.wait_until(clock_type::now() + jitter(backoff, r.rng));
            if (gen != e.driver_gen_)
                co_return;
            backoff = next_backoff(backoff, r.cfg);
            break;
        case next_step::wait:
            if (!e.watch_) {
                // Subscribe before the first retry: a release from now on cannot go unseen.
                e.start_watch();
            }
            if (!e.watch_ready_) {
                auto until = last.holder_ttl.count() >= 0
                                 ? clock_type::now() + std::min(last.holder_ttl + milliseconds(1), r.cfg.backoff_max)
                                 : clock_type::now() + jitter(backoff, r.rng);
                co_await e.wait_until(until);  // woken at once when the subscription is confirmed
                if (gen != e.driver_gen_)
                    co_return;
                break;
            }
            {
                bool by_note = co_await e.wait_until(retry_at(clock_type::now(), last.holder_ttl, backoff, r.rng));
                if (gen != e.driver_gen_) {
                    ++r.stats.woken_by_notification;  // a hand-off took the name meanwhile
                    co_return;
                }
                if (last.holder_ttl.count() < 0)
                    backoff = next_backoff(backoff, r.cfg);
                if (e.has_waiters())
                    ++(by_note ? r.stats.woken_by_notification : r.stats.woken_by_timer);
            }
            break;
        }
        if (!e.has_waiters()) {
            e.end_wait(true);
            e.driving_ = false;
            co_return;
        }
        if (e.grant_) {
            auto g = *std::exchange(e.grant_, std::nullopt);
            if (e.take_grant(g))
                co_return;
            // Else the attempt below confirms it: the token holds the name, so it succeeds.
        }
        // A direct wait keeps its token; once the grant channel is up, the store queues it.
        bool queue = e.direct_ && e.watch_ && e.watch_ready_;
        std::string token = e.direct_ && e.watch_ ? e.wait_token_ : r.new_token();
        e.notified_ = false;
        auto sent = clock_type::now();
        if (queue && !e.queued_since_)
            e.queued_since_ = sent;
        // Two statements, not a ?: inside co_await: g++ 12 destroys that temporary twice.
        std::tuple<error_code, acquire_result> reply;
        // A named request: g++ 12 destroys a temporary inside co_await twice.
        lease_request queued{e.store_name_, token, r.cfg.lease, lease_kind::mutex, 1, true};
        if (queue)
            reply = co_await r.st.async_try_acquire(queued, use_tuple);
        else
            reply = co_await r.st.async_try_acquire(e.store_name_, token, r.cfg.lease, use_tuple);
        auto [ec, res] = reply;
        if (!ec && step == next_step::backoff)
            backoff = r.cfg.backoff_min;
        last = res;
        step = e.on_attempt(token, sent, ec, res);
    }
}

// Keeps the lease alive while held: renews every renew_interval, declares it lost when the
// store says it is not ours or its local deadline passes unconfirmed.
asio::awaitable<void> engine::watchdog(std::shared_ptr<engine> self, std::string token)
{
    auto& e = *self;
    auto& r = *e.reg_;
    auto current = [&] { return e.lease_ && e.lease_->token == token && !e.lease_->lost; };
    auto backoff = r.cfg.backoff_min;
    auto next = clock_type::now();  // started by arm_watchdog's timer: a renewal is due now
    while (current()) {
        auto wake_at = r.cfg.watchdog ? std::min(next, e.lease_->valid_until) : e.lease_->valid_until;
        if (!e.check_now_ && clock_type::now() < wake_at) {
            e.dog_.expires_at(wake_at);
            co_await e.dog_.async_wait(use_tuple);
        }
        if (!current())
            co_return;
        auto now = clock_type::now();
        if (now >= e.lease_->valid_until) {
            e.mark_lost();
            co_return;
        }
        if (!r.cfg.watchdog || (!e.check_now_ && now < next))
            continue;
        e.check_now_ = false;
        auto sent = now;
        asio::steady_timer limit(e.ex_, e.lease_->valid_until);
        auto result = co_await (r.st.async_renew(e.store_name_, token, r.cfg.lease, use_tuple) ||
                                limit.async_wait(use_tuple));
        if (!current())
            co_return;
        if (result.index() == 1) {
            e.mark_lost();
            co_return;
        }
        auto [ec, rr] = std::get<0>(result);
        if (ec) {
            ++r.stats.store_errors;
            if (!e.lease_->suspect) {
                e.lease_->suspect = true;
                ++r.stats.suspect;
                r.emit(lock_event_kind::suspect, e.name_, e.lease_->fence);
            }
            next = clock_type::now() + jitter(backoff, r.rng);
            backoff = std::min(backoff * 2, r.renew_every);
            continue;
        }
        if (!rr.owned) {
            e.mark_lost();
            co_return;
        }
        backoff = r.cfg.backoff_min;
        e.lease_->valid_until = lease_deadline(sent, r.cfg.lease, r.drift);
        e.lease_->suspect = false;
        ++r.stats.renewals;
        r.emit(lock_event_kind::renewed, e.name_, e.lease_->fence);
        if (rr.contended)
            e.yield_next_ = true;
        next = sent + r.renew_every;
    }
}

}  // namespace dlock::detail
