// SPDX-License-Identifier: BSL-1.0
// A completion handler held by a copyable owner (a coroutine's lambda, several callbacks),
// completed once through the store's executor: memcached's and PostgreSQL's coroutines.
#pragma once

#include "common/post_completion.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <utility>

namespace dlock::detail {

template <class Handler>
auto shared_handler(Handler h)
{
    return std::make_shared<Handler>(std::move(h));
}

/// Completes the shared handler (posted, as post_completion()); call it once.
template <class Handler, class... Args>
void post_shared(const boost::asio::any_io_executor& io_ex, const std::shared_ptr<Handler>& h, Args&&... args)
{
    post_completion(io_ex, std::move(*h), std::forward<Args>(args)...);
}

}  // namespace dlock::detail
