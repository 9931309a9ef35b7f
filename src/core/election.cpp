// SPDX-License-Identifier: BSL-1.0
// Leader election: campaign = acquire the name's mutex + a fenced proclaim; observers read
// the leader on every announcement and at the end of the leader's lease.
#include <dlock/capabilities.hpp>
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include "common/backoff.hpp"
#include "common/handler_work.hpp"
#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"
#include "core/lock_driver.hpp"
#include "core/primitive_core.hpp"
#include "core/watched_read.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <deque>
#include <optional>
#include <random>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

namespace detail {

/// What every copy of an election shares.
struct election_core : primitive_core {
    dlock::lock lk;
    election_capability* ops = nullptr;  // the store's elections (null: it keeps none)

    // async_leader, or not_supported (posted) from a store that keeps no elections.
    template <class F>
    void read_leader(F f)
    {
        if (!ops)
            return asio::post(ex, [f = std::move(f)]() mutable { f(error_code(error::not_supported), lock_status{}); });
        ops->async_leader(store_name, std::move(f));
    }

    static leadership make(guard g, std::shared_ptr<election_core> c, std::string value)
    {
        return leadership(std::move(g), std::move(c), std::move(value));
    }

    // Writes `value` with the lease `key`, retrying transient errors until `until` (the
    // lease's local deadline): a deposed leader's write is refused by the store itself.
    static asio::awaitable<error_code> proclaim(std::shared_ptr<election_core> c, lease_key key,
                                                clock_type::time_point until, std::string value)
    {
        backoff pause(c->backoff_min, c->backoff_max);
        asio::steady_timer timer(c->ex);
        for (;;) {
            if (key.token.empty() || clock_type::now() >= until)
                co_return error::lock_lost;
            if (!c->store_alive())
                co_return error::closed;
            if (!c->ops)
                co_return error::not_supported;
            auto [ec, owned] = co_await c->ops->async_proclaim(key, value, asio::as_tuple(asio::use_awaitable));
            if (!ec)
                co_return owned ? error_code() : error_code(error::lock_lost);
            if (!is_transient(ec))
                co_return ec;
            timer.expires_at(std::min(clock_type::now() + pause.next(c->rng), until));
            co_await timer.async_wait(asio::use_awaitable);
        }
    }
};

leader_info to_leader(const lock_status& st)
{
    if (!st.held || !st.value)
        return {};
    return {true, *st.value, st.fencing_token};
}

// Completes `h` from a co_spawn'ed coroutine's outcome: an exception becomes its code.
template <class Signature, class T>
auto spawn_completion(asio::any_io_executor ex, asio::any_completion_handler<Signature> h)
{
    auto slot = asio::get_associated_cancellation_slot(h);
    return asio::bind_cancellation_slot(slot, [ex, h = std::move(h)](std::exception_ptr e, T result) mutable {
        auto ec = code_of(e);
        if (ec)
            result = T{};
        post_completion(ex, std::move(h), ec, std::move(result));
    });
}

/// One observer: a watch on the name, one read at a time, a timer at the leader's lease end.
struct observer_core : watched_read<election_core, observer_core, lock_status>,
                       std::enable_shared_from_this<observer_core> {
    using next_signature = void(error_code, leader_info);
    asio::steady_timer expiry;
    bool dropped = false;  // its observer is gone: a deferred async_next started now is aborted
    clock_type::time_point lease_end = clock_type::time_point::max();  // of the last holder read
    std::optional<leader_info> last;
    std::deque<std::pair<error_code, leader_info>> queue;
    detail::stored_handler<next_signature> waiting;
    asio::cancellation_slot slot;

    explicit observer_core(std::shared_ptr<election_core> core) : watched_read(std::move(core)), expiry(c->ex) {}

    // The loop's steps (core/watched_read.hpp); the observer's owner keeps it alive.
    std::weak_ptr<observer_core> hold() { return weak_from_this(); }
    void read_store(read_callback f) { c->read_leader(std::move(f)); }
    void failed(error_code ec) { fail(ec); }

    bool take(const lock_status& st)
    {
        auto info = to_leader(st);
        // Another leader, and the last one's lease had run out by now: the name was free in
        // between (an expiry, not a hand-off, which comes before the lease's end), so say so.
        auto now = clock_type::now();
        if (last && last->present && info.present && info.term != last->term && now >= lease_end) {
            last = leader_info{};
            queue.emplace_back(error_code(), *last);
        }
        if (st.held && st.ttl >= milliseconds(0))
            lease_end = now + st.ttl;
        if (!last || *last != info) {
            last = info;
            queue.emplace_back(error_code(), info);
            deliver();
        }
        // Nobody announces an expiry: read again when the holder's lease would end.
        expiry.cancel();
        if (st.held && st.ttl >= milliseconds(0)) {
            expiry.expires_after(st.ttl + milliseconds(1));
            std::weak_ptr<observer_core> weak = shared_from_this();
            expiry.async_wait([weak](error_code tec) {
                if (auto self = weak.lock(); self && !tec)
                    self->check();
            });
        }
        return true;
    }

    void fail(error_code ec)
    {
        queue.emplace_back(ec, leader_info{});
        stop();
        deliver();
    }

    void stop()
    {
        if (end_loop())
            expiry.cancel();
    }

    void deliver()
    {
        if (!waiting || queue.empty())
            return;
        auto [ec, info] = queue.front();
        // A failure stays queued: every later call reports it too.
        if (!ec)
            queue.pop_front();
        complete(ec, std::move(info));
    }

    void complete(error_code ec, leader_info info)
    {
        if (slot.is_connected())
            slot.clear();
        slot = {};
        auto h = std::move(waiting);
        waiting = {};
        post_completion(c->ex, std::move(h), ec, std::move(info));
    }
};

}  // namespace detail

// ---- leadership ----

leadership::leadership(guard g, std::shared_ptr<detail::election_core> c, std::string value)
    : g_(std::move(g)), c_(std::move(c)), value_(std::make_shared<std::string>(std::move(value)))
{
}

const std::string& leadership::value() const noexcept
{
    static const std::string empty;
    return value_ ? *value_ : empty;
}

leadership::executor_type leadership::get_executor() const noexcept
{
    return c_ ? c_->ex : executor_type();
}

void leadership::proclaim_impl(const std::shared_ptr<detail::election_core>& c,
                               const std::shared_ptr<detail::hold>& hold, std::shared_ptr<std::string> out,
                               std::string value, asio::any_completion_handler<void(error_code)> h)
{
    if (!hold->active)  // resigned after the operation was made
        return detail::post_completion(c->ex, std::move(h), make_error_code(error::not_held));
    // As guard::is_lost: past the local deadline counts as lost before the watchdog notices.
    auto& driver = *hold->driver;
    auto until = driver.valid_until(*hold);
    if (driver.is_lost(*hold) || clock_type::now() >= until)
        return detail::post_completion(c->ex, std::move(h), make_error_code(error::lock_lost));
    auto done = detail::keep_work(std::move(h), c->ex);
    auto body = [](std::shared_ptr<detail::election_core> c, lease_key key, clock_type::time_point until, std::string v,
                   std::shared_ptr<std::string> out) -> asio::awaitable<int> {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        auto ec = co_await detail::election_core::proclaim(c, key, until, v);
        if (ec)
            throw boost::system::system_error(ec);
        *out = std::move(v);
        co_return 0;
    };
    auto slot = asio::get_associated_cancellation_slot(done);
    auto ex = c->ex;
    asio::co_spawn(ex, body(c, driver.lease_of(*hold), until, std::move(value), std::move(out)),
                   asio::bind_cancellation_slot(slot, [ex, h = std::move(done)](std::exception_ptr e, int) mutable {
                       detail::post_completion(ex, std::move(h), detail::code_of(e));
                   }));
}

// ---- leader_observer ----

leader_observer& leader_observer::operator=(leader_observer&& other) noexcept
{
    if (this != &other) {
        leader_observer old(std::move(*this));
        c_ = std::move(other.c_);
    }
    return *this;
}

leader_observer::~leader_observer()
{
    if (!c_)
        return;
    c_->dropped = true;
    c_->stop();
    if (c_->waiting)
        c_->complete(asio::error::operation_aborted, {});
}

leader_observer::executor_type leader_observer::get_executor() const noexcept
{
    return c_ ? c_->c->ex : executor_type();
}

void leader_observer::next_impl(const std::shared_ptr<detail::observer_core>& c,
                                asio::any_completion_handler<void(error_code, leader_info)> h)
{
    auto& o = *c;
    if (o.dropped)
        return detail::post_completion(o.c->ex, std::move(h), error_code(asio::error::operation_aborted),
                                       leader_info{});
    if (o.waiting)
        return detail::post_completion(o.c->ex, std::move(h), make_error_code(error::operation_in_progress),
                                       leader_info{});
    o.slot = detail::abort_on_cancel(h, o.c->ex, std::weak_ptr<detail::observer_core>(c), [](detail::observer_core& x) {
        if (x.waiting)
            x.complete(asio::error::operation_aborted, {});
    });
    o.waiting = detail::keep_work(std::move(h), o.c->ex);
    if (!o.queue.empty())
        o.deliver();
}

// ---- election ----

election::election(registry& reg, std::string_view name) : c_(std::make_shared<detail::election_core>())
{
    c_->bind(reg, name);
    c_->ops = c_->st->elections();
    // A store with a layout of its own for elections takes the leader kind; others a mutex.
    bool own_kind = (c_->st->traits().kinds & static_cast<unsigned>(lease_kind::leader)) != 0;
    c_->lk = own_kind ? lock(reg.driver_for(lease_kind::leader, name)) : reg.obtain(name);
}

const std::string& election::name() const noexcept
{
    static const std::string empty;
    return c_ ? c_->name : empty;
}

election::executor_type election::get_executor() const noexcept
{
    return c_ ? c_->ex : executor_type();
}

void election::campaign_impl(const std::shared_ptr<detail::election_core>& c, std::string value,
                             asio::any_completion_handler<campaign_signature> h)
{
    if (!c->store_alive())
        return detail::post_completion(c->ex, std::move(h), make_error_code(error::closed), leadership());
    if (!c->ops)  // known now: no lock to wait for first
        return detail::post_completion(c->ex, std::move(h), make_error_code(error::not_supported), leadership());
    auto body = [](std::shared_ptr<detail::election_core> c, std::string value) -> asio::awaitable<leadership> {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        guard g = co_await c->lk.acquire(asio::use_awaitable);
        auto key = g.lease();
        auto until = g.valid_until();
        auto ec = co_await detail::election_core::proclaim(c, key, until, value);
        if (ec)
            throw boost::system::system_error(ec);  // the guard releases the lease on its way out
        co_return detail::election_core::make(std::move(g), c, std::move(value));
    };
    asio::co_spawn(
        c->ex, body(c, std::move(value)),
        detail::spawn_completion<campaign_signature, leadership>(c->ex, detail::keep_work(std::move(h), c->ex)));
}

void election::leader_impl(const std::shared_ptr<detail::election_core>& c,
                           asio::any_completion_handler<leader_signature> h)
{
    if (!c->store_alive())
        return detail::post_completion(c->ex, std::move(h), make_error_code(error::closed), leader_info{});
    auto slot = asio::get_associated_cancellation_slot(h);
    c->read_leader(asio::bind_cancellation_slot(
        slot, [ex = c->ex, h = detail::keep_work(std::move(h), c->ex)](error_code ec, lock_status st) mutable {
            auto info = ec ? leader_info{} : detail::to_leader(st);
            detail::post_completion(ex, std::move(h), ec, std::move(info));
        }));
}

leader_observer election::observe()
{
    if (!c_)
        return {};
    auto o = std::make_shared<detail::observer_core>(c_);
    o->check();
    return leader_observer(std::move(o));
}

}  // namespace dlock
