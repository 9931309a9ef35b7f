// SPDX-License-Identifier: BSL-1.0
// The one rule every dlock operation follows to complete its handler: in place where the
// I/O completes when the handler has no executor of its own (or has exactly that one),
// dispatched to its own executor otherwise, posted when there is no I/O object at all.
// Internal: templates in the public headers need it; users do not.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/post.hpp>

#include <type_traits>
#include <utility>

namespace dlock::detail {

struct no_own_executor {};

/// True if `Handler` names no associated executor of its own.
template <class Handler>
inline constexpr bool has_own_executor =
    !std::is_same_v<boost::asio::associated_executor_t<Handler, no_own_executor>, no_own_executor>;

/// Whether `h` may run in place where `ex`'s I/O completes: it has no executor of its own,
/// or its own is `ex`. Then it is called directly, as `dispatch` would on that thread, with
/// no type-erased executor and no work tracking per completion.
template <class Handler>
bool completes_in_place(const Handler& h, const boost::asio::any_io_executor& ex)
{
    if constexpr (!has_own_executor<Handler>)
        return true;
    else if constexpr (std::is_same_v<boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>,
                                      boost::asio::any_io_executor>)
        return boost::asio::get_associated_executor(h, ex) == ex;
    else
        return false;  // a strand, another context's executor: dispatch there
}

/// Completes `h` with `args` through its own associated executor, never inline: for
/// operations on an empty handle, which has no executor of its own.
template <class Handler, class... Args>
void post_to_handler(Handler h, Args&&... args)
{
    auto ex = boost::asio::get_associated_executor(h);
    boost::asio::post(ex, boost::asio::append(std::move(h), std::forward<Args>(args)...));
}

}  // namespace dlock::detail
