// SPDX-License-Identifier: BSL-1.0
// The byte stream under a connection: TCP, TLS over TCP, or a unix socket, behind one face.
#pragma once

#include <dlock/redis/config.hpp>

#include "redis/drained_read.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>

#include <memory>
#include <optional>
#include <string_view>
#include <variant>

namespace dlock::redis::detail {

class stream {
public:
    stream(boost::asio::any_io_executor ex, const config& cfg);

    /// Resolve + connect + TLS handshake. Errors are mapped to dlock codes (connect_failed,
    /// resolve_failed, tls_failed); never throws.
    boost::asio::awaitable<boost::system::error_code> connect();

    boost::asio::awaitable<std::size_t> read_some(boost::asio::mutable_buffer buf);  // throws on error
    /// read_some as an asynchronous operation, for any completion token: co_awaited, it
    /// makes no coroutine frame of its own, and a token with a bound allocator places the
    /// operation there (the connection's read loop, once per reply). Over TCP and unix
    /// sockets, with `drain` a short read marks the socket drained (drained_read.hpp).
    template <class Token>
    auto async_read_some(boost::asio::mutable_buffer buf, bool drain, Token&& token)
    {
        return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
            [this, drain](auto handler, boost::asio::mutable_buffer b) {
                switch (sock_.index()) {
                case 1: async_read_drained(std::get<1>(sock_), b, drain, std::move(handler)); return;
                case 2: std::get<2>(sock_)->async_read_some(b, std::move(handler)); return;
                case 3: async_read_drained(std::get<3>(sock_), b, drain, std::move(handler)); return;
                }
                boost::asio::post(ex_, boost::asio::append(std::move(handler),
                                                           boost::system::error_code(boost::asio::error::not_connected),
                                                           std::size_t(0)));
            },
            token, buf);
    }
    boost::asio::awaitable<void> write(boost::asio::const_buffer buf);  // throws on error
    /// Writes all of `buf`, then calls `h(error_code, std::size_t)` (callback form: a write
    /// started from a request's initiation needs no coroutine hop).
    template <class Handler>
    void async_write(boost::asio::const_buffer buf, Handler&& h)
    {
        switch (sock_.index()) {
        case 1: boost::asio::async_write(std::get<1>(sock_), buf, std::forward<Handler>(h)); return;
        case 2: boost::asio::async_write(*std::get<2>(sock_), buf, std::forward<Handler>(h)); return;
        case 3: boost::asio::async_write(std::get<3>(sock_), buf, std::forward<Handler>(h)); return;
        }
        boost::asio::post(
            ex_, [h = std::forward<Handler>(h)]() mutable { h(boost::asio::error::not_connected, std::size_t(0)); });
    }
    void close() noexcept;

private:
    using tcp = boost::asio::ip::tcp;
    using tls_stream = boost::asio::ssl::stream<tcp::socket>;
    using unix_socket = boost::asio::local::stream_protocol::socket;

    boost::asio::any_io_executor ex_;
    const config& cfg_;
    std::unique_ptr<boost::asio::ssl::context> tls_ctx_;
    std::variant<std::monostate, tcp::socket, std::unique_ptr<tls_stream>, unix_socket> sock_;
};

}  // namespace dlock::redis::detail
