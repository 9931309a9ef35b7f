// SPDX-License-Identifier: BSL-1.0
// Waiting on a socket that a C client library owns (libpq, MariaDB Connector/C): its fd is
// assigned to a stream_descriptor for one wait and released after, never closed, and a
// timer bounds the wait. Header-only: each backend's connection includes it.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>

namespace dlock::detail {

struct borrowed_socket {
    explicit borrowed_socket(const boost::asio::any_io_executor& ex) : sd(ex), timer(ex) {}
    ~borrowed_socket() { release(); }
    borrowed_socket(const borrowed_socket&) = delete;
    borrowed_socket& operator=(const borrowed_socket&) = delete;

    /// Gives the fd back (a wait in progress ends as cancelled). Call it before the library
    /// closes the fd.
    void release()
    {
        if (sd.is_open())
            sd.release();
    }

    boost::asio::posix::stream_descriptor sd;
    boost::asio::steady_timer timer;  ///< bounds one wait
    std::uint64_t gen = 0;            ///< the wait the timer may still cancel
};

enum class socket_wait {
    ready,
    timeout,    ///< `deadline` passed
    cancelled,  ///< sd.cancel() or release() meanwhile
    failed      ///< no usable fd
};

/// Waits until `fd` is ready for `w` or `deadline` (time_point::max(): none) passes. `sock`
/// may be an aliasing pointer into the object that owns it: the timer only holds it weakly.
inline boost::asio::awaitable<socket_wait> wait_borrowed(std::shared_ptr<borrowed_socket> sock, int fd,
                                                         boost::asio::posix::descriptor_base::wait_type w,
                                                         std::chrono::steady_clock::time_point deadline)
{
    if (fd < 0)
        co_return socket_wait::failed;
    boost::system::error_code ec;
    sock->sd.assign(fd, ec);
    if (ec)
        co_return socket_wait::failed;
    auto gen = ++sock->gen;
    auto fired = std::make_shared<bool>(false);
    if (deadline != std::chrono::steady_clock::time_point::max()) {
        sock->timer.expires_at(deadline);
        sock->timer.async_wait(
            [weak = std::weak_ptr<borrowed_socket>(sock), gen, fired](boost::system::error_code tec) {
                auto me = weak.lock();
                if (!tec && me && me->gen == gen && me->sd.is_open()) {
                    *fired = true;
                    me->sd.cancel();
                }
            });
    }
    auto [wec] = co_await sock->sd.async_wait(w, boost::asio::as_tuple(boost::asio::use_awaitable));
    ++sock->gen;  // a late timer no longer touches the descriptor
    sock->timer.cancel();
    sock->release();
    if (*fired)
        co_return socket_wait::timeout;
    if (wec)
        co_return socket_wait::cancelled;
    co_return socket_wait::ready;
}

}  // namespace dlock::detail
