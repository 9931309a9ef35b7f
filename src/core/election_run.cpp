// SPDX-License-Identifier: BSL-1.0
// election::run: campaign, lead with the body bound to the lease's loss, resign; with
// rejoin, a term ended by a loss campaigns again (Curator's LeaderLatch re-joins the same way).
#include <dlock/election.hpp>
#include <dlock/error.hpp>

#include "core/lock_run.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <utility>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// How one term ended.
enum class term_end {
    returned,
    lost
};

// One term: the body under the lease's loss, then the resignation. Throws what run() throws
// for this term, except a loss that `rejoin` turns into another campaign.
asio::awaitable<term_end> lead_once(leadership& l, const std::function<asio::awaitable<void>(leadership&)>& body,
                                    bool rejoin)
{
    // The caller's cancellation during the body must not skip the resignation below; it
    // stops the next campaign instead (run_on's own co_await throws).
    co_await asio::this_coro::throw_if_cancelled(false);
    std::function<asio::awaitable<void>()> start = [&] { return body(l); };  // named: no temporary in co_await
    auto failure = co_await detail::run_bound(l.is_lost(), l.lost_slot(), start);
    bool lost = l.is_lost();
    error_code ec;
    co_await l.resign(asio::redirect_error(asio::use_awaitable, ec));
    lost = lost || ec == error::lock_lost;
    // Stopped by the loss (it threw): another term if asked. A body that returned has
    // finished its work, and a loss under it is reported, never run again.
    if (lost && failure && rejoin)
        co_return term_end::lost;
    detail::throw_outcome(lost, failure, ec);
    co_return term_end::returned;
}

// A coroutine of a copy, not of `this`: the awaitable may start after the election has moved.
asio::awaitable<void> run_on(election e, std::string value, std::function<asio::awaitable<void>(leadership&)> body,
                             election_run_options opts)
{
    for (;;) {
        // A lease lost before its value was written (a store flapping) is a loss like any.
        auto [ec, l] = co_await e.campaign(value, use_tuple);
        if (ec == error::lock_lost && opts.rejoin)
            continue;
        if (ec)
            throw boost::system::system_error(ec);
        if (co_await lead_once(l, body, opts.rejoin) == term_end::returned)
            co_return;
    }
}

}  // namespace

asio::awaitable<void> election::run(std::string value, std::function<asio::awaitable<void>(leadership&)> body,
                                    election_run_options opts)
{
    return run_on(*this, std::move(value), std::move(body), opts);
}

}  // namespace dlock
