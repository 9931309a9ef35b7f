// SPDX-License-Identifier: BSL-1.0
// The loop of a latch's wait and an election's observer: one read of a name at a time
// (read_cycle), the watch made after the first good read and its events read again, a
// transient failure read again after the next pause, a permanent one handed back.
#pragma once

#include <dlock/store.hpp>

#include "core/op_support.hpp"
#include "core/read_cycle.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <utility>

namespace dlock::detail {

// `Op` derives from watched_read<Core, Op, State> and has: hold() (a shared_ptr to keep it
// alive across the store's calls, or a weak_ptr), read_store(callback), failed(error_code),
// and take(state) for a good read (false: that read finished the operation).
template <class Op>
void watched_check(Op& op);

template <class Op, class State>
void watched_reply(Op& op, boost::system::error_code ec, State st)
{
    op.reads.replied();
    if (op.done || retry_transient(ec, op.retry, op.pause, op.c->rng, op.hold(), [](Op& o) { watched_check(o); }))
        return;
    if (ec)
        return op.failed(ec);
    op.pause.reset();
    if (!op.take(st))
        return;
    switch (op.reads.after_good_read()) {
    case read_cycle::next::watch:
        op.watch = op.c->st->watch(op.c->store_name, [p = op.hold()](watch_event) {
            if (auto self = locked(p))
                watched_check(*self);
        });
        break;
    case read_cycle::next::read: watched_check(op); break;
    case read_cycle::next::none: break;
    }
}

template <class Op>
void watched_check(Op& op)
{
    if (op.done || !op.reads.want())
        return;
    if (!op.c->store_alive())
        return op.failed(error::closed);
    op.read_store([p = op.hold()](boost::system::error_code ec, auto st) {
        if (auto self = locked(p))
            watched_reply(*self, ec, std::move(st));
    });
}

/// What an operation of the loop keeps: its core (st, store_name, store_alive(), rng, ex,
/// backoff_min/max), the name's watch once made, the pause between failed reads.
template <class Core, class Op, class State>
struct watched_read {
    using read_callback = std::function<void(boost::system::error_code, State)>;

    explicit watched_read(std::shared_ptr<Core> core, bool watch_after_first = true)
        : c(std::move(core)), retry(c->ex), pause(c->backoff_min, c->backoff_max), reads(watch_after_first)
    {
    }
    /// Reads now, or after the read under way.
    void check() { watched_check(static_cast<Op&>(*this)); }
    /// Ends the loop: the watch unwatched, the pause cancelled. False if it had ended already.
    bool end_loop()
    {
        if (std::exchange(done, true))
            return false;
        if (watch && c->store_alive())
            c->st->unwatch(*watch);
        watch.reset();
        retry.cancel();
        return true;
    }

    std::shared_ptr<Core> c;
    std::optional<store::watch_id> watch;
    boost::asio::steady_timer retry;
    backoff pause;
    read_cycle reads;
    bool done = false;  ///< finished (a latch's wait) or stopped (an observer)
};

}  // namespace dlock::detail
