// SPDX-License-Identifier: BSL-1.0
// lock::run's second half, shared by every primitive that hands out guards.
#pragma once

#include <dlock/guard.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/system/error_code.hpp>

#include <exception>
#include <functional>

namespace dlock::detail {

/// Runs `body` with the guard's loss bound to its cancellation, then releases; throws
/// system_error(lock_lost) if the lease was lost, else rethrows the body's exception.
boost::asio::awaitable<void> run_held(guard g, std::function<boost::asio::awaitable<void>(guard&)> body);

/// The body `start` makes, run with `lost_slot` (a lease's loss) as its cancellation; a
/// lease lost already (the slot fired before the body could be bound to it) is a lock_lost
/// failure, and the body never starts. Gives back what the body threw, if anything. The
/// caller's own cancellation does not stop it (run_held, election::run).
boost::asio::awaitable<std::exception_ptr> run_bound(bool lost, boost::asio::cancellation_slot lost_slot,
                                                     std::function<boost::asio::awaitable<void>()> start);

/// How a held run ends once the lease is given back: lock_lost if it was lost (during the
/// body, or as the release said), else the body's exception, else the release's error.
void throw_outcome(bool lost, const std::exception_ptr& failure, boost::system::error_code ec);

}  // namespace dlock::detail
