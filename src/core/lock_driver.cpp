// SPDX-License-Identifier: BSL-1.0
#include "core/lock_driver.hpp"

#include <dlock/error.hpp>

#include "common/post_completion.hpp"
#include "common/saturate.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <random>

namespace dlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using act = fsm_action::type;

// ---- registry_state ----

namespace {

// 11 random characters of 64 (66 bits): with the counter's few digits a token stays within
// std::string's inline 15 characters, so a held lock's token allocates nothing.
std::string make_client_id()
{
    std::random_device rd;
    std::uint64_t bits = (std::uint64_t(rd()) << 32) ^ rd();
    unsigned more = rd();
    std::string id;
    for (int i = 0; i < 11; ++i) {
        id += token_digits[i < 10 ? bits & 63 : more & 63];
        bits >>= 6;
    }
    return id;
}

fsm_config make_fsm_config(const lock_config& c, const store_traits& t, lease_kind kind)
{
    fsm_config f;
    f.lease = c.lease;
    f.drift = effective_drift(c);
    f.renew_every = effective_renew_interval(c);
    f.watchdog = c.watchdog;
    f.handoff_budget = c.handoff_budget;
    f.backoff_min = c.backoff_min;
    f.backoff_max = c.backoff_max;
    f.yield_pause = c.yield_pause;
    f.direct_handoff = t.direct_handoff;
    f.inherent_queue = t.inherent_queue && t.direct_handoff;
    f.per_session = t.live == liveness::per_session;
    f.confirms = f.per_session && t.confirms_leases;
    f.events = static_cast<bool>(c.on_event);
    if (t.batches_renewals && c.watchdog) {
        // Late by at most a grid step, which must leave the lease ample time.
        auto slack = f.lease - f.drift - f.renew_every;
        f.renew_grid = std::max(milliseconds(0), std::min(f.renew_every / 16, slack / 4));
    }
    f.shared = kind == lease_kind::read;
    return f;
}

}  // namespace

registry_state::registry_state(store& s, lock_config c)
    : st(s), ex(s.get_executor()), store_alive(lifetime_of(s)), cfg(std::move(c)), traits(s.traits()),
      config_error(validate_config(cfg, traits, s.capabilities())), client_id(make_client_id()),
      rng(std::random_device{}()), fsm_exclusive{make_fsm_config(cfg, traits, lease_kind::mutex), stats, rng, client_id,
                                                 lease_seq},
      fsm_shared{make_fsm_config(cfg, traits, lease_kind::read), stats, rng, client_id, lease_seq}
{
}

void registry_state::emit(lock_event_kind kind, const std::string& name, std::uint64_t fence)
{
    if (cfg.on_event)
        cfg.on_event(lock_event{kind, name, fence});
}

void registry_state::request_done()
{
    if (--in_flight != 0 || drains.empty())
        return;
    auto ds = std::move(drains);
    drains.clear();
    for (auto& d : ds)
        if (*d)
            post_completion(ex, std::move(*d), error_code());  // the store may be gone
}

// ---- driver: inputs ----

namespace {

}  // namespace

lock_driver::lock_driver(std::shared_ptr<registry_state> reg, std::string name, lease_kind kind, unsigned capacity,
                         bool in_map)
    : reg_(std::move(reg)), name_(std::move(name)), kind_(kind), capacity_(capacity), fsm_(reg_->fsm_for(kind))
{
    store_name_ = reg_->cfg.prefix.empty() ? name_ : reg_->cfg.prefix + ":" + name_;
    in_map_ = in_map;
}

lock_driver::~lock_driver()
{
    if (lingering_)
        reg_->request_done();
    if (store_alive()) {
        if (watch_)
            reg_->st.unwatch(*watch_);
        if (session_watch_)
            reg_->st.unwatch(*session_watch_);
        if (unwatch_later_)
            for (auto id : *unwatch_later_)
                reg_->st.unwatch(id);
    }
    if (!in_map_)
        return;
    auto it = reg_->drivers.find({kind_, name_});
    if (it != reg_->drivers.end() && it->second == this)
        reg_->drivers.erase(it);
}

void lock_driver::acquire(std::uint64_t owner, bool try_once, std::optional<milliseconds> limit,
                          asio::any_completion_handler<lock::acquire_signature> h, bool in_place)
{
    auto& r = *reg_;
    error_code ec = r.config_error ? r.config_error : validate_name(r.cfg, name_);
    if (!ec && !(r.traits.kinds & static_cast<unsigned>(kind_)))
        ec = error::not_supported;  // this store has no read-write locks or semaphores
    if (!ec && capacity_ == 0)
        ec = error::invalid_option;  // a semaphore of no permits could never be acquired
    if (ec)
        return post_completion(reg_->ex, std::move(h), ec, guard());
    if (!store_alive())
        return post_completion(reg_->ex, std::move(h), error_code(error::closed), guard());
    if (r.traits.live == liveness::per_session && !session_watch_) {
        std::weak_ptr<lock_driver> weak = shared_from_this();
        session_watch_ = r.st.watch_session([weak](session_event ev, const session_info& info) {
            if (auto self = weak.lock()) {
                self->fsm_.on_session(ev, info, clock_type::now());
                self->feed(true);
            }
        });
    }

    auto id = ++next_id_;
    auto w = std::make_shared<waiter>();
    w->owner = owner;
    w->in_place = in_place;
    w->slot = asio::get_associated_cancellation_slot(h);
    w->handler = std::move(h);
    std::weak_ptr<lock_driver> weak = shared_from_this();
    auto now = clock_type::now();
    if (limit) {
        w->timer.emplace(reg_->ex, saturating_add(now, *limit));
        w->timer->async_wait([weak, id](error_code ec) {
            auto self = weak.lock();
            if (ec || !self)
                return;
            self->fsm_.on_deadline(id, clock_type::now());
            self->feed(true);
        });
    }
    if (w->slot.is_connected()) {
        w->slot.assign([weak, id](asio::cancellation_type) {
            if (auto self = weak.lock()) {
                self->fsm_.on_cancel(id, asio::error::operation_aborted, clock_type::now());
                self->feed(false);
            }
        });
    }
    waiters_.emplace_back(id, std::move(w));
    fsm_.on_acquire(id, owner, try_once, now);
    feed(false);
}

void lock_driver::release(const std::shared_ptr<hold>& h, done_handler done, bool by_destructor, bool in_place)
{
    if (!h->active) {
        if (done)
            post_completion(reg_->ex, std::move(done), error_code(error::not_held));
        return;
    }
    h->active = false;
    if (auto it = holds_.find(h->id); it != holds_.end())
        holds_.erase(it);
    if (!store_alive()) {
        // A guard freed with the io_context after its store: the lease ends by itself.
        if (done)
            post_completion(reg_->ex, std::move(done), error_code(error::closed));
        return;
    }
    auto& r = *reg_;
    if (by_destructor)
        ++r.stats.released_by_destructor;
    r.stats.hold.record(std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - h->granted));
    if (h->lost_waiter) {
        auto w = std::move(h->lost_waiter);
        post_completion(reg_->ex, std::move(*w), error_code(asio::error::operation_aborted));
    }
    auto id = ++next_id_;
    if (done)
        releases_.emplace_back(id, release_waiter{std::move(done), in_place});
    fsm_.on_release(h->id, id, clock_type::now());
    feed(false);
}

void lock_driver::wait_lost(const std::shared_ptr<hold>& h, done_handler done)
{
    if (!h->active)
        return post_completion(reg_->ex, std::move(done), error_code(error::not_held));
    if (is_lost(*h))
        return post_completion(reg_->ex, std::move(done), error_code(error::lock_lost));
    if (h->lost_waiter)
        return post_completion(reg_->ex, std::move(done), error_code(error::operation_in_progress));
    auto slot = asio::get_associated_cancellation_slot(done);
    h->lost_waiter = std::make_unique<done_handler>(std::move(done));
    if (slot.is_connected()) {
        std::weak_ptr<hold> wh = h;
        slot.assign([wh, ex = reg_->ex](asio::cancellation_type) {
            auto h = wh.lock();
            if (!h || !h->lost_waiter)
                return;
            auto w = std::move(h->lost_waiter);
            post_completion(ex, std::move(*w), error_code(asio::error::operation_aborted));
        });
    }
}

clock_type::time_point lock_driver::valid_until(const hold& h) const noexcept
{
    return h.active ? fsm_.valid_until() : clock_type::time_point::min();
}

const std::string& lock_driver::diagnostics() const noexcept
{
    static const std::string none;
    return diagnostics_ ? *diagnostics_ : none;
}

void lock_driver::force_release(asio::any_completion_handler<void(error_code, bool)> h)
{
    if (!store_alive())
        return post_completion(reg_->ex, std::move(h), error_code(error::closed), false);
    // Counted in flight, so that registry::async_drain waits for it as for a release.
    reg_->request_sent();
    std::weak_ptr<lock_driver> weak = shared_from_this();
    reg_->st.async_force_release(store_name_, kind_,
                                 [weak, reg = reg_, h = std::move(h)](error_code ec, bool held) mutable {
                                     reg->request_done();
                                     // A lease held here may be the one freed: nobody new may join it.
                                     if (auto self = weak.lock(); self && !ec && held) {
                                         self->fsm_.on_forced(clock_type::now());
                                         self->feed(true);
                                     }
                                     post_completion(reg->ex, std::move(h), ec, held);
                                 });
}

bool lock_driver::is_lost(const hold& h) const noexcept
{
    return h.active && fsm_.valid_until() == clock_type::time_point::min();
}

// ---- driver: actions ----

void lock_driver::feed(bool from_io)
{
    // The machine's actions are performed where they lie; each keeps the kind of input that
    // made it (an I/O completion or a call), for the completion rule.
    auto& acts = fsm_.actions();
    for (auto i = std::size_t(tagged_); i < acts.size(); ++i)
        acts[i].by_io = from_io;
    tagged_ = static_cast<std::uint32_t>(acts.size());
    if (running_)
        return;  // a completion run below called back in: the loop below takes these too
    running_ = true;
    auto keep = shared_from_this();
    std::size_t i = 0;
    try {
        for (; i < acts.size(); ++i) {
            auto a = std::move(acts[i]);  // moved out: performing it may append to `acts`
            perform(a, a.by_io);
        }
    } catch (...) {
        // A completion run inline threw (it leaves io_context::run): the actions not yet
        // performed go out in a posted pass, or this name would stay stuck mid-pass.
        acts.erase(acts.begin(), acts.begin() + static_cast<std::ptrdiff_t>(i + 1));
        tagged_ = static_cast<std::uint32_t>(acts.size());
        running_ = false;
        apply_timer_plan();
        asio::post(reg_->ex, [keep] { keep->feed(false); });
        throw;
    }
    acts.clear();
    tagged_ = 0;
    fsm_.release_buffers();
    if (waiters_.empty() && waiters_.capacity() != 0)
        decltype(waiters_)().swap(waiters_);
    // Unsubscribing waits until the waiters just served have run: their commands go first.
    if (unwatch_later_ && store_alive()) {
        for (auto id : *unwatch_later_)
            reg_->st.unwatch(id);
    }
    unwatch_later_.reset();
    running_ = false;
    apply_timer_plan();  // last: if it throws (out of memory), the driver is not left running
    if (fsm_.lingering() != lingering_) {
        lingering_ = !lingering_;
        if (lingering_)
            reg_->request_sent();
        else
            reg_->request_done();
    }
}

void lock_driver::perform(fsm_action& a, bool from_io)
{
    auto& r = *reg_;
    switch (a.t) {
    case act::attempt: {
        if (!store_alive())
            return;
        auto self = shared_from_this();
        lease_request req{store_name_, a.token, r.cfg.lease, kind_, capacity_, a.queue};
        r.request_sent();
        r.st.async_try_acquire(req, [self](error_code ec, acquire_result res) {
            self->reg_->request_done();
            self->fsm_.on_attempt_done(ec, res, clock_type::now());
            self->feed(true);
        });
        return;
    }
    case act::watch: {
        if (!store_alive())
            return;
        std::weak_ptr<lock_driver> weak = shared_from_this();
        watch_ = r.st.watch(store_name_, a.token, [weak](watch_event ev, const grant_notice& g) {
            if (auto self = weak.lock()) {
                self->fsm_.on_watch(ev, g, clock_type::now());
                self->feed(true);
            }
        });
        return;
    }
    case act::unwatch:
        if (watch_) {
            if (!unwatch_later_)
                unwatch_later_ = std::vector<store::watch_id>();
            unwatch_later_->push_back(*std::exchange(watch_, std::nullopt));
        }
        return;
    case act::set_timer:
        timer_plan_ = timer_plan::arm;
        timer_at_ = a.at;
        return;
    case act::cancel_timer: timer_plan_ = timer_plan::disarm; return;
    case act::renew:
        if (!store_alive())
            return;
        r.request_sent();
        r.st.async_renew(lease_key{store_name_, a.token, a.ref, kind_}, r.cfg.lease,
                         [self = shared_from_this()](error_code ec, renew_result res) {
                             self->reg_->request_done();
                             self->fsm_.on_renew_done(ec, res, clock_type::now());
                             self->feed(true);
                         });
        return;
    case act::release:
        if (a.at > clock_type::now()) {
            auto t = std::make_shared<asio::steady_timer>(reg_->ex, a.at);
            t->async_wait([self = shared_from_this(), t, a](error_code) { self->send_release(a); });
            return;
        }
        send_release(a);
        return;
    case act::complete_waiter: complete_waiter(a, from_io); return;
    case act::complete_release: {
        auto it = releases_.find(a.id);
        if (it == releases_.end())
            return;  // a guard's destructor: nobody waits for the outcome
        auto w = std::move(it->second);
        releases_.erase(it);
        if (from_io && w.in_place)
            std::move(w.handler)(a.ec);
        else if (from_io)
            asio::dispatch(reg_->ex, asio::append(std::move(w.handler), a.ec));
        else
            post_completion(reg_->ex, std::move(w.handler), a.ec);
        return;
    }
    case act::lost: signal_lost(); return;
    case act::event: r.emit(a.kind, name_, a.fence); return;
    }
}

// feed() keeps this driver alive: the reference a disarm hands back may go here.
void lock_driver::apply_timer_plan()
{
    switch (std::exchange(timer_plan_, timer_plan::none)) {
    case timer_plan::none: return;
    case timer_plan::arm: reg_->timers.arm(timer_, timer_at_, shared_from_this()); return;
    case timer_plan::disarm: reg_->timers.disarm(timer_); return;
    }
}

void lock_driver::timer_due(timer_entry&, std::shared_ptr<void> self)
{
    auto e = std::static_pointer_cast<lock_driver>(std::move(self));
    e->fsm_.on_timer(clock_type::now());
    e->feed(true);
}

void lock_driver::send_release(const fsm_action& a)
{
    if (!store_alive())
        return;
    reg_->request_sent();
    reg_->st.async_release(lease_key{store_name_, a.token, a.ref, kind_},
                           [self = shared_from_this(), id = a.id](error_code ec, bool owned) {
                               self->reg_->request_done();
                               self->fsm_.on_release_done(id, ec, owned, clock_type::now());
                               self->feed(true);
                           });
}

void lock_driver::complete_waiter(fsm_action& a, bool from_io)
{
    auto it = waiters_.find(a.id);
    if (it == waiters_.end())
        return;
    auto w = std::move(it->second);
    waiters_.erase(it);
    if (w->timer)
        w->timer->cancel();
    if (w->slot.is_connected())
        w->slot.clear();
    guard g;
    if (a.hold != 0) {
        auto h = std::make_shared<hold>();
        h->driver = shared_from_this();
        h->id = a.hold;
        h->owner = w->owner;
        h->fence = a.fence;
        h->granted = clock_type::now();
        holds_.emplace_back(h->id, h.get());
        g = guard(std::move(h));
    } else if (a.ec && !is_transient(a.ec) && a.ec != asio::error::operation_aborted && a.ec != error::timeout) {
        if (diagnostics_)
            *diagnostics_ = reg_->st.last_error_text();  // in place: a reference handed out stays valid
        else
            diagnostics_ = std::make_unique<std::string>(reg_->st.last_error_text());
    }
    // A completion caused by I/O runs at once (its caller is not on the stack); one caused
    // by a call (acquire, release, cancel) is posted, as Asio requires.
    if (from_io && w->in_place)
        std::move(w->handler)(a.ec, std::move(g));  // what dispatch would do here, minus its machinery
    else if (from_io)
        asio::dispatch(reg_->ex, asio::append(std::move(w->handler), a.ec, std::move(g)));
    else
        post_completion(reg_->ex, std::move(w->handler), a.ec, std::move(g));
}

void lock_driver::signal_lost()
{
    // A cancellation handler may release any guard: look each one up afresh.
    std::vector<std::uint64_t> ids;
    for (auto& [id, h] : holds_)
        ids.push_back(id);
    for (auto id : ids) {
        auto it = holds_.find(id);
        if (it == holds_.end())
            continue;
        hold* h = it->second;
        if (h->lost_waiter) {
            auto w = std::move(h->lost_waiter);
            post_completion(reg_->ex, std::move(*w), error_code(error::lock_lost));
        }
        h->lost.emit(asio::cancellation_type::terminal);
    }
}

const boost::asio::any_io_executor& executor_of(const lock_driver& e) noexcept
{
    return e.executor();
}
}  // namespace dlock::detail
