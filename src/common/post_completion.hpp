// SPDX-License-Identifier: BSL-1.0
// Completes a handler later, never inside the frame that started the operation.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>

#include <utility>

namespace dlock::detail {

/// Posts through `io_ex` (the I/O object's executor); Asio then runs the handler on its
/// own associated executor, as its own operations do.
template <class Handler, class... Args>
void post_completion(const boost::asio::any_io_executor& io_ex, Handler h, Args&&... args)
{
    boost::asio::post(io_ex, boost::asio::append(std::move(h), std::forward<Args>(args)...));
}

/// The same for a handler held by name (a lambda's capture, a parameter): moved from.
template <class Handler, class... Args>
void post_moved(const boost::asio::any_io_executor& io_ex, Handler& h, Args&&... args)
{
    post_completion(io_ex, std::move(h), std::forward<Args>(args)...);
}

}  // namespace dlock::detail
