// SPDX-License-Identifier: BSL-1.0
// The count-down latch: count-downs retried with the same member, waits that watch, check,
// then sleep until the store reports a change.
#include <dlock/capabilities.hpp>
#include <dlock/error.hpp>
#include <dlock/latch.hpp>
#include <dlock/registry.hpp>

#include "common/backoff.hpp"
#include "common/handler_work.hpp"
#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"
#include "core/lease_policy.hpp"
#include "core/op_support.hpp"
#include "core/primitive_core.hpp"
#include "core/watched_read.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <unistd.h>

#include <optional>
#include <random>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;

namespace detail {

/// What every copy of a latch shares: the store, the name as the store sees it, the settings.
struct latch_core : primitive_core {
    latch_capability* ops = nullptr;  // the store's latches (null: it keeps none)
    std::uint64_t count = 0;
    milliseconds ttl{0};
    error_code invalid;         // the settings' verdict, reported by every operation
    std::string member_prefix;  // random per latch object: the library's members
    std::uint64_t member_seq = 0;

    std::string new_member() { return member_prefix + std::to_string(++member_seq); }
};

namespace {

// One count-down: sent, retried on transient errors with the same member, until done.
struct count_down_op : std::enable_shared_from_this<count_down_op> {
    std::shared_ptr<latch_core> c;
    std::string member;
    stored_handler<latch::count_down_signature> handler;
    asio::steady_timer timer;
    backoff pause;
    asio::cancellation_slot slot;
    bool done = false;

    count_down_op(std::shared_ptr<latch_core> core, std::string m,
                  asio::any_completion_handler<latch::count_down_signature> h)
        : c(std::move(core)), member(std::move(m)), handler(std::move(h)), timer(c->ex),
          pause(c->backoff_min, c->backoff_max)
    {
    }

    void start()
    {
        slot = abort_on_cancel(handler, c->ex, weak_from_this(),
                               [](count_down_op& op) { op.finish(asio::error::operation_aborted, 0); });
        send();
    }

    void send()
    {
        if (!c->store_alive())
            return finish(error::closed, 0);
        c->ops->async_count_down(
            c->store_name, member, c->count, c->ttl,
            [self = shared_from_this()](error_code ec, std::uint64_t remaining) { self->on_reply(ec, remaining); });
    }

    void on_reply(error_code ec, std::uint64_t remaining)
    {
        if (done)
            return;
        if (!retry_transient(ec, timer, pause, c->rng, shared_from_this(), [](count_down_op& op) {
                if (!op.done)
                    op.send();
            }))
            finish(ec, remaining);
    }

    void finish(error_code ec, std::uint64_t remaining)
    {
        if (std::exchange(done, true))
            return;
        timer.cancel();
        if (slot.is_connected())
            slot.clear();
        post_completion(c->ex, std::move(handler), ec, remaining);
    }
};

// One wait: read the latch; then watch the name and read again on `ready` and on every
// later event; done when it reads 0. Reads are never concurrent: an event during one asks for one more.
struct wait_op : watched_read<latch_core, wait_op, latch_state>, std::enable_shared_from_this<wait_op> {
    stored_handler<latch::wait_signature> handler;
    asio::steady_timer deadline;
    asio::cancellation_slot slot;

    wait_op(std::shared_ptr<latch_core> core, asio::any_completion_handler<latch::wait_signature> h)
        : watched_read(std::move(core), false), handler(std::move(h)), deadline(c->ex)
    {
    }

    void start(milliseconds limit)
    {
        std::weak_ptr<wait_op> weak = shared_from_this();
        slot = abort_on_cancel(handler, c->ex, weak, [](wait_op& op) { op.finish(asio::error::operation_aborted); });
        if (limit > milliseconds(0) && limit != milliseconds::max()) {
            deadline.expires_at(saturating_deadline(limit));
            deadline.async_wait([weak](error_code ec) {
                if (auto self = weak.lock(); self && !ec)
                    self->finish(error::timeout);
            });
        }
        reads = read_cycle(limit > milliseconds(0));
        // One read before watching: a done latch, or a store that keeps none, answers at
        // once (a store that cannot watch the name would never say `ready`).
        check();
    }

    static std::chrono::steady_clock::time_point saturating_deadline(milliseconds d)
    {
        auto now = std::chrono::steady_clock::now();
        if (d <= milliseconds(0))
            return now;
        auto room = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::time_point::max() - now);
        return d >= room ? std::chrono::steady_clock::time_point::max() : now + d;
    }

    // The loop's steps (core/watched_read.hpp); the watch holds the operation until finish() unwatches it.
    std::shared_ptr<wait_op> hold() { return shared_from_this(); }
    void read_store(read_callback f) { c->ops->async_latch_state(c->store_name, std::move(f)); }
    // A store gone is found inside check(), which may run in start(): finish from a post.
    void failed(error_code ec) { ec == error::closed ? post_finish(ec) : finish(ec); }
    bool take(const latch_state& st)
    {
        if (st.count != 0 && st.count != c->count)
            return finish(error::count_mismatch), false;
        if (st.count != 0 && st.remaining == 0)
            return finish({}), false;
        if (!watch && !reads.watch_pending())  // a zero-length wait_for: one check only
            return finish(error::timeout), false;
        return true;
    }

    void post_finish(error_code ec)
    {
        asio::post(c->ex, [self = shared_from_this(), ec] { self->finish(ec); });
    }

    void finish(error_code ec)
    {
        if (!end_loop())
            return;
        deadline.cancel();
        if (slot.is_connected())
            slot.clear();
        post_completion(c->ex, std::move(handler), ec);
    }
};

// One read of the latch, completed with the remaining count.
struct count_op : std::enable_shared_from_this<count_op> {
    std::shared_ptr<latch_core> c;
    stored_handler<latch::count_signature> handler;
    asio::steady_timer retry;
    backoff pause;
    asio::cancellation_slot slot;
    bool done = false;

    count_op(std::shared_ptr<latch_core> core, asio::any_completion_handler<latch::count_signature> h)
        : c(std::move(core)), handler(std::move(h)), retry(c->ex), pause(c->backoff_min, c->backoff_max)
    {
    }

    void start()
    {
        slot = abort_on_cancel(handler, c->ex, weak_from_this(),
                               [](count_op& op) { op.finish(asio::error::operation_aborted, 0); });
        read();
    }

    void read()
    {
        if (!c->store_alive())
            return finish(error::closed, 0);
        c->ops->async_latch_state(
            c->store_name, [self = shared_from_this()](error_code ec, latch_state st) { self->on_state(ec, st); });
    }

    void on_state(error_code ec, latch_state st)
    {
        if (done || retry_transient(ec, retry, pause, c->rng, shared_from_this(), [](count_op& op) {
                if (!op.done)
                    op.read();
            }))
            return;
        if (ec)
            return finish(ec, 0);
        if (st.count == 0)  // nobody has counted down yet
            return finish({}, c->count);
        if (st.count != c->count)
            return finish(error::count_mismatch, 0);
        finish({}, st.remaining);
    }

    void finish(error_code ec, std::uint64_t remaining)
    {
        if (std::exchange(done, true))
            return;
        retry.cancel();
        if (slot.is_connected())
            slot.clear();
        post_completion(c->ex, std::move(handler), ec, remaining);
    }
};

}  // namespace
}  // namespace detail

latch::latch(registry& reg, std::string_view name, std::uint64_t count, latch_config cfg)
    : c_(std::make_shared<detail::latch_core>())
{
    auto& c = *c_;
    const auto& lc = reg.config();
    c.bind(reg, name);
    c.count = count;
    c.ttl = cfg.ttl;
    c.invalid = detail::validate_name(lc, name);
    c.ops = c.st->latches();
    if (!c.invalid && !c.ops)
        c.invalid = error::not_supported;  // known now: no store round trip to learn it
    if (!c.invalid && (count == 0 || count > max_latch_count))
        c.invalid = error::invalid_option;
    if (!c.invalid && (cfg.ttl <= milliseconds(0) || cfg.ttl > c.st->traits().max_ttl))
        c.invalid = error::invalid_lease;
    // The library's members: random per latch object, numbered per call.
    static constexpr char hex[] = "0123456789abcdef";
    std::random_device rd;
    for (int i = 0; i < 16; ++i)
        c.member_prefix += hex[rd() & 15];
    c.member_prefix += ':' + std::to_string(::getpid()) + ':';
}

const std::string& latch::name() const noexcept
{
    static const std::string empty;
    return c_ ? c_->name : empty;
}

std::uint64_t latch::initial_count() const noexcept
{
    return c_ ? c_->count : 0;
}

void latch::count_down_impl(const std::shared_ptr<detail::latch_core>& c, bool own, std::string member,
                            asio::any_completion_handler<count_down_signature> h)
{
    error_code bad = c->invalid;
    if (!bad && own && member.empty())
        bad = error::invalid_option;
    if (!bad && !c->store_alive())
        bad = error::closed;
    if (bad)
        return detail::post_completion(c->ex, std::move(h), bad, std::uint64_t{0});
    if (!own)
        member = c->new_member();
    std::make_shared<detail::count_down_op>(c, std::move(member), detail::keep_work(std::move(h), c->ex))->start();
}

void latch::wait_impl(const std::shared_ptr<detail::latch_core>& c, milliseconds d,
                      asio::any_completion_handler<wait_signature> h)
{
    error_code bad = c->invalid;
    if (!bad && !c->store_alive())
        bad = error::closed;
    if (bad)
        return detail::post_completion(c->ex, std::move(h), bad);
    std::make_shared<detail::wait_op>(c, detail::keep_work(std::move(h), c->ex))->start(d);
}

void latch::count_impl(const std::shared_ptr<detail::latch_core>& c, asio::any_completion_handler<count_signature> h)
{
    error_code bad = c->invalid;
    if (!bad && !c->store_alive())
        bad = error::closed;
    if (bad)
        return detail::post_completion(c->ex, std::move(h), bad, std::uint64_t{0});
    std::make_shared<detail::count_op>(c, detail::keep_work(std::move(h), c->ex))->start();
}

latch::executor_type latch::get_executor() const noexcept
{
    return c_ ? c_->ex : executor_type();
}

}  // namespace dlock
