// SPDX-License-Identifier: BSL-1.0
// lock::run's second half, shared by every primitive that hands out guards.
#pragma once

#include <dlock/guard.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>

namespace dlock::detail {

/// Runs `body` with the guard's loss bound to its cancellation, then releases; throws
/// system_error(lock_lost) if the lease was lost, else rethrows the body's exception.
boost::asio::awaitable<void> run_held(guard g, std::function<boost::asio::awaitable<void>(guard&)> body);

}  // namespace dlock::detail
