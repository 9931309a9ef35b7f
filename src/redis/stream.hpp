// The byte stream under a connection: TCP, TLS over TCP, or a unix socket, behind one face.
#pragma once

#include <dlock/redis/config.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

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
    boost::asio::awaitable<void> write(boost::asio::const_buffer buf);               // throws on error
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
