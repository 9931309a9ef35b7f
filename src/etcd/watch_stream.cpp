// SPDX-License-Identifier: BSL-1.0
#include "etcd/watch_stream.hpp"

#include <dlock/error.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace dlock::etcd::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

struct watch_stream::state {
    state(asio::any_io_executor ex, callback c) : stream(std::move(ex)), cb(std::move(c)) {}
    beast::tcp_stream stream;
    callback cb;
    bool cancelled = false;
};

namespace {

// One error ends the stream: its callback hears it once.
void fail(watch_stream::state& st, error_code ec)
{
    if (st.cancelled)
        return;
    st.cancelled = true;
    auto cb = std::move(st.cb);
    cb(ec, watch_message{});
}

// Resolves and connects: the error, as the contract names it.
asio::awaitable<error_code> connect(watch_stream::state& st, const config& cfg, const endpoint& ep)
{
    error_code ec;
    tcp::resolver resolver(st.stream.get_executor());
    auto results = co_await resolver.async_resolve(ep.host, std::to_string(ep.port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec || st.cancelled)
        co_return ec ? error_code(error::resolve_failed) : ec;
    st.stream.expires_after(cfg.connect_timeout);
    co_await st.stream.async_connect(results, asio::redirect_error(asio::use_awaitable, ec));
    if (ec)
        co_return error::connect_failed;
    st.stream.socket().set_option(tcp::no_delay(true), ec);
    co_return error_code();
}

http::request<http::string_body> watch_request(const endpoint& ep, std::string body)
{
    http::request<http::string_body> req{http::verb::post, std::string(watch_path), 11};
    req.set(http::field::host, ep.host + ":" + std::to_string(ep.port));
    req.set(http::field::content_type, "application/json");
    // etcd's "require leader": a member cut off from the leader cancels the watch instead
    // of leaving it silent (the gateway passes Grpc-Metadata-* headers as gRPC metadata).
    req.set("Grpc-Metadata-Hasleader", "true");
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
}

// Hands each complete line of `lines` to the callback and drops it. False: the stream
// ended (a line that is no watch message, or the callback cancelled it).
bool deliver(watch_stream::state& st, std::string& lines)
{
    std::size_t start = 0;
    for (auto nl = lines.find('\n'); nl != std::string::npos; nl = lines.find('\n', start)) {
        std::string_view line(lines.data() + start, nl - start);
        start = nl + 1;
        if (line.find_first_not_of(" \r\t") == std::string_view::npos)
            continue;
        watch_message m;
        reply_error err;
        if (!parse_watch_message(line, m, err)) {
            fail(st, err.code);
            return false;
        }
        auto cb = st.cb;  // a copy: the callback may cancel (and so drop st.cb)
        cb(error_code(), m);
        if (st.cancelled)
            return false;
    }
    lines.erase(0, start);
    return true;
}

asio::awaitable<void> run(std::shared_ptr<watch_stream::state> st, config cfg, endpoint ep, std::string body)
{
    auto ec = co_await connect(*st, cfg, ep);
    if (st->cancelled || ec)
        co_return fail(*st, ec);
    auto req = watch_request(ep, std::move(body));
    st->stream.expires_after(cfg.request_timeout);
    co_await http::async_write(st->stream, req, asio::redirect_error(asio::use_awaitable, ec));
    beast::flat_buffer buf;
    http::response_parser<http::string_body> p;
    p.body_limit(boost::none);
    std::string lines;
    auto on_chunk = [&](std::uint64_t, beast::string_view data, error_code&) {
        lines.append(data.data(), data.size());
        return data.size();
    };
    p.on_chunk_body(on_chunk);  // kept by reference: it lives as long as this frame
    if (!ec)
        co_await http::async_read_header(st->stream, buf, p, asio::redirect_error(asio::use_awaitable, ec));
    if (st->cancelled || ec)
        co_return fail(*st, ec == beast::error::timeout ? error::timeout : error::connection_lost);
    st->stream.expires_never();  // a quiet watch is a healthy one
    if (p.get().result_int() != 200) {
        st->stream.expires_after(cfg.request_timeout);
        co_await http::async_read(st->stream, buf, p, asio::redirect_error(asio::use_awaitable, ec));
        co_return fail(*st, classify(p.get().result_int(), p.get().body() + lines).code);
    }
    for (;;) {
        co_await http::async_read_some(st->stream, buf, p, asio::redirect_error(asio::use_awaitable, ec));
        if (st->cancelled || !deliver(*st, lines))
            co_return;
        if (ec || p.is_done())
            co_return fail(*st, error::connection_lost);
    }
}

}  // namespace

std::shared_ptr<watch_stream> watch_stream::start(asio::any_io_executor ex, const config& cfg, const endpoint& ep,
                                                  std::string create_body, callback cb)
{
    auto st = std::make_shared<state>(ex, std::move(cb));
    asio::co_spawn(ex, run(st, cfg, ep, std::move(create_body)), asio::detached);
    return std::shared_ptr<watch_stream>(new watch_stream(st));
}

watch_stream::~watch_stream()
{
    cancel();
}

void watch_stream::cancel()
{
    if (!st_ || st_->cancelled)
        return;
    st_->cancelled = true;
    st_->cb = nullptr;
    error_code ignored;
    st_->stream.socket().cancel(ignored);
    st_->stream.socket().close(ignored);
}

}  // namespace dlock::etcd::detail
