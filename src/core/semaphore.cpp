// SPDX-License-Identifier: BSL-1.0
#include <dlock/semaphore.hpp>

#include "common/handler_work.hpp"
#include "common/post_completion.hpp"
#include "core/lease_policy.hpp"
#include "core/lock_run.hpp"
#include "core/semaphore_state.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
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

// One status read: the store's holders of the name against the permits.
void semaphore::available_impl(asio::any_completion_handler<available_signature> h)
{
    auto& s = *s_;
    auto& r = *s.reg;
    auto ex = r.ex;
    // The checks an acquire makes first: a store without semaphores answers nothing else.
    error_code bad = r.config_error ? r.config_error : detail::validate_name(r.cfg, s.name);
    if (!bad && !(r.traits.kinds & static_cast<unsigned>(lease_kind::permit)))
        bad = error::not_supported;
    if (!bad && (s.mismatch || s.permits == 0))
        bad = s.permits == 0 ? error::invalid_option : error::kind_mismatch;
    if (bad)
        return detail::post_completion(ex, std::move(h), bad, 0u);
    if (r.store_alive.expired())
        return detail::post_completion(ex, std::move(h), error_code(error::closed), 0u);
    auto name = r.cfg.prefix.empty() ? s.name : r.cfg.prefix + ":" + s.name;
    auto slot = asio::get_associated_cancellation_slot(h);
    r.st.async_status(
        name, asio::bind_cancellation_slot(slot, [ex, permits = s.permits, h = detail::keep_work(std::move(h), ex)](
                                                     error_code ec, lock_status st) mutable {
            // The name in use as another primitive, or as a semaphore of another size.
            bool in_use = st.held || st.queued > 0 || st.holders > 0;
            bool other = in_use && (st.kind != lease_kind::permit || (st.capacity > 0 && st.capacity != permits));
            if (!ec && other)
                ec = error::kind_mismatch;
            unsigned held = static_cast<unsigned>(std::min<std::size_t>(st.holders, permits));
            detail::post_completion(ex, std::move(h), ec, ec ? 0u : permits - held);
        }));
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
