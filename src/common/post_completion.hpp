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

}  // namespace dlock::detail

namespace dlock::detail {

/// Asio 1.26's any_completion_handler move-assignment recurses forever (it copies from an
/// lvalue through the converting constructor): move through swap instead.
template <class AnyHandler>
void assign_handler(AnyHandler& target, AnyHandler&& source) noexcept
{
    AnyHandler tmp(std::move(source));
    target.swap(tmp);
}

}  // namespace dlock::detail
