// SPDX-License-Identifier: BSL-1.0
#include "redis/sentinel.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/request.hpp>

#include "redis/resp/decoder.hpp"
#include "redis/stream.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <charconv>

namespace dlock::redis::detail {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;

namespace {

// One sentinel, one question: SENTINEL get-master-addr-by-name (after AUTH if configured).
asio::awaitable<error_code> ask(asio::any_io_executor ex, const config& cfg, const sentinel_node& node,
                                std::string& host, std::uint16_t& port, std::string& said)
{
    config sc = cfg;
    sc.kind = cfg.kind == transport::tls ? transport::tls : transport::tcp;
    sc.host = node.host;
    sc.port = node.port;
    stream sock(ex, sc);
    if (auto ec = co_await sock.connect())
        co_return ec;
    request req;
    std::size_t expected = 1;
    if (!cfg.sentinel.password.empty()) {
        if (cfg.sentinel.username.empty())
            req.push("AUTH", cfg.sentinel.password);
        else
            req.push("AUTH", cfg.sentinel.username, cfg.sentinel.password);
        ++expected;
    }
    req.push("SENTINEL", "get-master-addr-by-name", cfg.sentinel.master_name);
    resp::decoder dec;
    try {
        co_await sock.write(asio::buffer(req.payload()));
        std::array<char, 1024> buf;
        std::size_t got = 0;
        while (got < expected) {
            std::size_t n = co_await sock.read_some(asio::buffer(buf));
            dec.feed({buf.data(), n});
            error_code ec;
            while (got < expected) {
                auto r = dec.next(ec);
                if (ec)
                    co_return ec;
                if (!r)
                    break;
                ++got;
                if (r->is_error()) {
                    said = r->str;
                    co_return got < expected ? error_code(error::auth_failed) : error_code(error::resolve_failed);
                }
                if (got < expected)
                    continue;  // +OK to AUTH
                if (r->is_nil()) {
                    said = "does not know master '" + cfg.sentinel.master_name + "'";
                    co_return error::resolve_failed;
                }
                std::uint16_t p = 0;
                if (r->type != reply_type::array || r->elements.size() != 2 ||
                    std::from_chars(r->elements[1].str.data(), r->elements[1].str.data() + r->elements[1].str.size(), p)
                            .ec != std::errc() ||
                    p == 0) {
                    said = "gave an unexpected reply";
                    co_return error::protocol_error;
                }
                host = r->elements[0].str;
                port = p;
            }
        }
    } catch (const boost::system::system_error&) {
        said = "closed the connection";
        co_return error::connect_failed;
    }
    co_return error_code();
}

}  // namespace

asio::awaitable<error_code> discover_master(asio::any_io_executor ex, config& cfg, std::string& message)
{
    auto& nodes = cfg.sentinel.nodes;
    if (nodes.empty()) {
        message = "no sentinels configured for master '" + cfg.sentinel.master_name + "'";
        co_return error::resolve_failed;
    }
    message.clear();
    error_code last = error::resolve_failed;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        std::string host, said;
        std::uint16_t port = 0;
        error_code ec;
        if (cfg.connect_timeout.count() == 0) {
            ec = co_await ask(ex, cfg, nodes[i], host, port, said);
        } else {
            asio::steady_timer timer(ex, cfg.connect_timeout);
            auto r = co_await (ask(ex, cfg, nodes[i], host, port, said) || timer.async_wait(asio::use_awaitable));
            ec = r.index() == 1 ? error_code(error::timeout) : std::get<0>(r);
        }
        if (!ec) {
            cfg.host = host;
            cfg.port = port;
            std::rotate(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(i),
                        nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1);
            co_return error_code();
        }
        last = ec;
        message += (message.empty() ? "" : "; ") + ("sentinel " + nodes[i].host + ":" + std::to_string(nodes[i].port) +
                                                    ": " + (said.empty() ? ec.message() : said));
    }
    // An AUTH refusal is the most useful thing to report; otherwise "could not find it".
    co_return last == error::auth_failed ? last : error_code(error::resolve_failed);
}

}  // namespace dlock::redis::detail
