// SPDX-License-Identifier: BSL-1.0
#include "redis/stream.hpp"

#include <dlock/error.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <openssl/ssl.h>

namespace dlock::redis::detail {

namespace asio = boost::asio;
using boost::system::error_code;

stream::stream(asio::any_io_executor ex, const config& cfg) : ex_(std::move(ex)), cfg_(cfg) {}

asio::awaitable<error_code> stream::connect()
{
    error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    if (cfg_.kind == transport::unix_socket) {
        auto& s = sock_.emplace<unix_socket>(ex_);
        co_await s.async_connect(asio::local::stream_protocol::endpoint(cfg_.path), token);
        co_return ec ? error_code(error::connect_failed) : error_code();
    }
    tcp::resolver resolver(ex_);
    auto endpoints = co_await resolver.async_resolve(cfg_.host, std::to_string(cfg_.port), token);
    if (ec)
        co_return error::resolve_failed;
    tcp::socket sock(ex_);
    co_await asio::async_connect(sock, endpoints, token);
    if (ec)
        co_return error::connect_failed;
    sock.set_option(tcp::no_delay(true), ec);
    if (cfg_.kind == transport::tcp) {
        sock_ = std::move(sock);
        co_return error_code();
    }

    tls_ctx_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    auto& ctx = *tls_ctx_;
    ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3);
    error_code cfg_ec;
    if (cfg_.tls_ca_file.empty())
        ctx.set_default_verify_paths(cfg_ec);
    else
        ctx.load_verify_file(cfg_.tls_ca_file, cfg_ec);
    if (!cfg_ec && !cfg_.tls_cert_file.empty())
        ctx.use_certificate_chain_file(cfg_.tls_cert_file, cfg_ec);
    if (!cfg_ec && !cfg_.tls_key_file.empty())
        ctx.use_private_key_file(cfg_.tls_key_file, asio::ssl::context::pem, cfg_ec);
    if (cfg_ec)
        co_return error::tls_failed;
    ctx.set_verify_mode(cfg_.tls_verify ? asio::ssl::verify_peer : asio::ssl::verify_none);
    auto tls = std::make_unique<tls_stream>(std::move(sock), ctx);
    if (cfg_.tls_verify) {
        // An IP literal is checked against the certificate's IP SANs by the same verifier.
        tls->set_verify_callback(asio::ssl::host_name_verification(cfg_.host));
    }
    SSL_set_tlsext_host_name(tls->native_handle(), cfg_.host.c_str());
    co_await tls->async_handshake(asio::ssl::stream_base::client, token);
    if (ec)
        co_return error::tls_failed;
    sock_ = std::move(tls);
    co_return error_code();
}

asio::awaitable<std::size_t> stream::read_some(asio::mutable_buffer buf)
{
    switch (sock_.index()) {
    case 1: co_return co_await std::get<1>(sock_).async_read_some(buf, asio::use_awaitable);
    case 2: co_return co_await std::get<2>(sock_)->async_read_some(buf, asio::use_awaitable);
    case 3: co_return co_await std::get<3>(sock_).async_read_some(buf, asio::use_awaitable);
    }
    throw boost::system::system_error(asio::error::not_connected);
}

asio::awaitable<void> stream::write(asio::const_buffer buf)
{
    switch (sock_.index()) {
    case 1: co_await asio::async_write(std::get<1>(sock_), buf, asio::use_awaitable); co_return;
    case 2: co_await asio::async_write(*std::get<2>(sock_), buf, asio::use_awaitable); co_return;
    case 3: co_await asio::async_write(std::get<3>(sock_), buf, asio::use_awaitable); co_return;
    }
    throw boost::system::system_error(asio::error::not_connected);
}

void stream::close() noexcept
{
    error_code ignored;
    switch (sock_.index()) {
    case 1: std::get<1>(sock_).close(ignored); break;
    case 2: std::get<2>(sock_)->lowest_layer().close(ignored); break;
    case 3: std::get<3>(sock_).close(ignored); break;
    }
}

}  // namespace dlock::redis::detail
