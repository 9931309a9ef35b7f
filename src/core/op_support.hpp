// SPDX-License-Identifier: BSL-1.0
// What the primitives' operations (latch, election) do alike around the store's calls: a
// cancellation that posts the abort, a transient failure retried after the next pause, and
// a spawned body's exception turned into its error code.
#pragma once

#include <dlock/error.hpp>

#include "common/backoff.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <exception>
#include <memory>
#include <random>

namespace dlock::detail {

/// Connects `h`'s cancellation slot, if it has one: a cancellation posts `abort(op)`
/// (completing inside the emitter would clear the slot mid-call). The op clears the slot
/// it is given back when it completes.
template <class Handler, class Op, class Abort>
boost::asio::cancellation_slot abort_on_cancel(Handler& h, const boost::asio::any_io_executor& ex, std::weak_ptr<Op> op,
                                               Abort abort)
{
    auto slot = boost::asio::get_associated_cancellation_slot(h);
    if (slot.is_connected())
        slot.assign([op, ex, abort](boost::asio::cancellation_type) {
            boost::asio::post(ex, [op, abort] {
                if (auto self = op.lock())
                    abort(*self);
            });
        });
    return slot;
}

/// The operation behind `p`: a shared_ptr keeps it alive while the store or a timer holds
/// the callback, a weak_ptr leaves its life to its owner (empty once gone).
template <class T>
std::shared_ptr<T> locked(const std::weak_ptr<T>& p) noexcept
{
    return p.lock();
}
template <class T>
const std::shared_ptr<T>& locked(const std::shared_ptr<T>& p) noexcept
{
    return p;
}

/// A transient `ec` (the store may answer next time): `again(op)` after the next pause,
/// unless the timer is cancelled first, and true.
template <class Ptr, class Again>
bool retry_transient(boost::system::error_code ec, boost::asio::steady_timer& t, backoff& pause, std::minstd_rand& rng,
                     Ptr op, Again again)
{
    if (!ec || !is_transient(ec))
        return false;
    t.expires_after(pause.next(rng));
    t.async_wait([op, again](boost::system::error_code tec) {
        if (auto self = locked(op); self && !tec)
            again(*self);
    });
    return true;
}

/// The error code of a spawned body's exception (none: no error).
inline boost::system::error_code code_of(std::exception_ptr e) noexcept
{
    if (!e)
        return {};
    try {
        std::rethrow_exception(e);
    } catch (const boost::system::system_error& se) {
        return se.code();
    } catch (...) {
        return error::invalid_request;
    }
}

}  // namespace dlock::detail
