// SPDX-License-Identifier: BSL-1.0
// Outstanding work on a waiting handler's own executor, as Asio's own operations keep it:
// a handler bound to another io_context keeps that context's run() going until it is called.
#pragma once

#include "common/stored_handler.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>

#include <new>
#include <utility>

namespace dlock::detail {

/// A handler with tracked work on its own executor; the work ends once the handler has run
/// (or is destroyed uncalled). Executor, allocator and cancellation slot are the handler's.
template <class... Signatures>
class working_handler {
public:
    using allocator_type = typename stored_handler<Signatures...>::allocator_type;
    using cancellation_slot_type = typename stored_handler<Signatures...>::cancellation_slot_type;

    working_handler(boost::asio::any_completion_handler<Signatures...>&& h, boost::asio::any_completion_executor work)
        : h_(std::move(h)), work_(std::move(work))
    {
    }

    template <class... Args>
    void operator()(Args&&... args)
    {
        auto work = std::move(work_);  // held until the handler has returned
        h_(std::forward<Args>(args)...);
    }

    const stored_handler<Signatures...>& handler() const noexcept { return h_; }
    allocator_type get_allocator() const noexcept { return h_.get_allocator(); }
    cancellation_slot_type get_cancellation_slot() const noexcept { return h_.get_cancellation_slot(); }

private:
    stored_handler<Signatures...> h_;
    boost::asio::any_completion_executor work_;
};

/// `h`, keeping work on its own executor while it waits if that is not `io_ex` (whose own
/// pending I/O is the registry's business, as with Asio's I/O objects); `foreign`: the
/// caller already knows it is not (detail::completes_in_place said so).
template <class... Signatures>
boost::asio::any_completion_handler<Signatures...> keep_work(boost::asio::any_completion_handler<Signatures...> h,
                                                             const boost::asio::any_io_executor& io_ex,
                                                             bool foreign = false)
{
    boost::asio::any_completion_executor ours(std::nothrow, io_ex);
    auto own = boost::asio::get_associated_executor(h, ours);
    if (!foreign && own == ours)
        return h;
    auto work = boost::asio::prefer(std::move(own), boost::asio::execution::outstanding_work.tracked);
    return boost::asio::any_completion_handler<Signatures...>(
        working_handler<Signatures...>(std::move(h), std::move(work)));
}

}  // namespace dlock::detail

namespace boost::asio {

/// The wrapped handler's own executor.
template <class... Signatures, class Candidate>
struct associated_executor<dlock::detail::working_handler<Signatures...>, Candidate> {
    using type = any_completion_executor;
    static type get(const dlock::detail::working_handler<Signatures...>& h,
                    const Candidate& candidate = Candidate()) noexcept
    {
        return associated_executor<dlock::detail::stored_handler<Signatures...>, Candidate>::get(h.handler(),
                                                                                                 candidate);
    }
};

}  // namespace boost::asio
