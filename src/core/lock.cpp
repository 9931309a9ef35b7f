// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/lock.hpp>

#include "common/handler_work.hpp"
#include "common/post_completion.hpp"
#include "core/lock_driver.hpp"
#include "core/lock_run.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;

owner::owner() noexcept
{
    static std::atomic<std::uint64_t> next{1};
    id_ = next.fetch_add(1, std::memory_order_relaxed);
}

const std::string& lock::name() const noexcept
{
    static const std::string empty;
    return e_ ? e_->name() : empty;
}

const std::string& lock::diagnostics() const noexcept
{
    static const std::string empty;
    return e_ ? e_->diagnostics() : empty;
}

void lock::force_release_impl(asio::any_completion_handler<force_signature> h)
{
    // A handler on an executor of its own keeps work there while it waits (Asio's rule).
    e_->force_release(detail::keep_work(std::move(h), e_->executor()));
}

void lock::acquire_impl(owner o, mode m, std::chrono::milliseconds d, asio::any_completion_handler<acquire_signature> h,
                        bool in_place)
{
    std::optional<std::chrono::milliseconds> limit;
    if (m == mode::bounded)
        limit = std::max(d, std::chrono::milliseconds(0));
    // A handler on an executor of its own keeps work there while it waits (Asio's rule).
    auto done = in_place ? std::move(h) : detail::keep_work(std::move(h), e_->executor(), true);
    e_->acquire(o.id(), m == mode::try_once, limit, std::move(done), in_place);
}

lock::executor_type lock::get_executor() const noexcept
{
    return e_ ? e_->executor() : executor_type();
}

namespace {

// A coroutine of a copy, not of `this`: the awaitable may start after the lock has moved.
asio::awaitable<void> run_on(lock lk, std::function<asio::awaitable<void>(guard&)> body)
{
    guard g = co_await lk.acquire(asio::use_awaitable);
    co_await detail::run_held(std::move(g), std::move(body));
}

}  // namespace

asio::awaitable<void> lock::run(std::function<asio::awaitable<void>(guard&)> body)
{
    return run_on(*this, std::move(body));
}

asio::awaitable<void> detail::run_held(guard g, std::function<asio::awaitable<void>(guard&)> body)
{
    // The caller's cancellation (it reached the acquire) must not skip the release below.
    co_await asio::this_coro::throw_if_cancelled(false);
    std::function<asio::awaitable<void>()> start = [&] { return body(g); };  // named: no temporary in co_await
    auto failure = co_await run_bound(g.is_lost(), g.lost_slot(), start);
    bool lost = g.is_lost();
    error_code ec;
    co_await g.release(asio::redirect_error(asio::use_awaitable, ec));
    throw_outcome(lost || ec == error::lock_lost, failure, ec);
}

asio::awaitable<std::exception_ptr> detail::run_bound(bool lost, asio::cancellation_slot lost_slot,
                                                      std::function<asio::awaitable<void>()> start)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    std::exception_ptr failure;
    try {
        if (lost)
            throw boost::system::system_error(error::lock_lost);
        co_await asio::co_spawn(co_await asio::this_coro::executor, start(),
                                asio::bind_cancellation_slot(lost_slot, asio::use_awaitable));
    } catch (...) {
        failure = std::current_exception();
    }
    co_return failure;
}

void detail::throw_outcome(bool lost, const std::exception_ptr& failure, error_code ec)
{
    if (lost)
        throw boost::system::system_error(error::lock_lost);
    if (failure)
        std::rethrow_exception(failure);
    if (ec)
        throw boost::system::system_error(ec);
}

// ---- guard ----

guard& guard::operator=(guard&& other) noexcept
{
    if (this != &other) {
        guard old(std::move(*this));
        h_ = std::move(other.h_);
    }
    return *this;
}

guard::~guard()
{
    if (h_ && h_->active)
        h_->driver->release(h_, {}, true);
}

bool guard::owns_lock() const noexcept
{
    return h_ && h_->active;
}

const std::string& guard::name() const noexcept
{
    static const std::string empty;
    return h_ ? h_->driver->name() : empty;
}

std::uint64_t guard::fencing_token() const noexcept
{
    return h_ ? h_->fence : 0;
}

std::chrono::steady_clock::time_point guard::valid_until() const noexcept
{
    return h_ ? h_->driver->valid_until(*h_) : std::chrono::steady_clock::time_point::min();
}

// Past the local deadline counts as lost even before the driver's timer has run: after a
// pause (SIGSTOP, a long GC-like stall) the caller's own code may resume first.
bool guard::is_lost() const noexcept
{
    return h_ && (h_->driver->is_lost(*h_) || (h_->active && std::chrono::steady_clock::now() >= valid_until()));
}

lease_key guard::lease() const
{
    return h_ ? h_->driver->lease_of(*h_) : lease_key{};
}

dlock::owner guard::owner() const noexcept
{
    return dlock::owner(h_ ? h_->owner : 0);
}

asio::cancellation_slot guard::lost_slot() noexcept
{
    return h_ ? h_->lost.slot() : asio::cancellation_slot();
}

void guard::wait_lost_impl(const std::shared_ptr<detail::hold>& hold, asio::any_completion_handler<void(error_code)> h)
{
    hold->driver->wait_lost(hold, detail::keep_work(std::move(h), hold->driver->executor()));
}

void guard::release_impl(asio::any_completion_handler<void(error_code)> h, bool in_place)
{
    auto hold = std::move(h_);
    auto done = in_place ? std::move(h) : detail::keep_work(std::move(h), hold->driver->executor(), true);
    hold->driver->release(hold, std::move(done), false, in_place);
}

guard::executor_type guard::get_executor() const noexcept
{
    return h_ ? h_->driver->executor() : executor_type();
}

const detail::lock_driver* guard::driver_of() const noexcept
{
    return h_->driver.get();
}

}  // namespace dlock
