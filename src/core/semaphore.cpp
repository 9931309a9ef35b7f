// SPDX-License-Identifier: BSL-1.0
#include <dlock/semaphore.hpp>

#include "common/handler_work.hpp"
#include "common/post_completion.hpp"
#include "core/lock_run.hpp"
#include "core/semaphore_state.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;

namespace detail {

lock_driver& semaphore_state::pick()
{
    for (auto& l : lanes)
        if (l->unused())
            return *l;
    if (lanes.size() < permits)
        return *lanes.emplace_back(std::make_shared<lock_driver>(reg, name, lease_kind::permit, permits));
    return **std::min_element(lanes.begin(), lanes.end(),
                              [](auto& a, auto& b) { return a->waiters() + a->holds() < b->waiters() + b->holds(); });
}

}  // namespace detail

const std::string& semaphore::name() const noexcept
{
    static const std::string empty;
    return s_ ? s_->name : empty;
}

unsigned semaphore::permits() const noexcept
{
    return s_ ? s_->permits : 0;
}

void semaphore::acquire_impl(mode m, std::chrono::milliseconds d, asio::any_completion_handler<acquire_signature> h)
{
    auto& s = *s_;
    if (s.mismatch || s.permits == 0)
        return detail::post_completion(s.reg->st.get_executor(), std::move(h),
                                       error_code(s.permits == 0 ? error::invalid_option : error::kind_mismatch),
                                       guard());
    std::optional<std::chrono::milliseconds> limit;
    if (m == mode::bounded && d <= lock::unlimited_after)
        limit = std::max(d, std::chrono::milliseconds(0));
    s.pick().acquire(owner().id(), m == mode::try_once, limit, detail::keep_work(std::move(h), s.reg->ex));
}

semaphore::executor_type semaphore::get_executor() const noexcept
{
    return s_ ? s_->reg->ex : executor_type();
}

namespace {

// A coroutine of a copy, not of `this`: the awaitable may start after the semaphore has moved.
asio::awaitable<void> run_on(semaphore s, std::function<asio::awaitable<void>(guard&)> body)
{
    guard g = co_await s.acquire(asio::use_awaitable);
    co_await detail::run_held(std::move(g), std::move(body));
}

}  // namespace

asio::awaitable<void> semaphore::run(std::function<asio::awaitable<void>(guard&)> body)
{
    return run_on(*this, std::move(body));
}

}  // namespace dlock
