// SPDX-License-Identifier: BSL-1.0
// The I/O of Sentinel discovery; what to send and what the replies mean is sentinel_query.
#include "redis/sentinel.hpp"

#include <dlock/error.hpp>

#include "redis/resp/decoder.hpp"
#include "redis/sentinel_query.hpp"
#include "redis/stream.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>

namespace dlock::redis::detail {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;

namespace {

// Connects to one sentinel, writes the question, feeds the replies until `q` is decided.
asio::awaitable<void> ask(asio::any_io_executor ex, const config& cfg, const sentinel_node& node, sentinel_query& q)
{
    config sc = cfg;
    sc.kind = cfg.kind == transport::tls ? transport::tls : transport::tcp;
    sc.host = node.host;
    sc.port = node.port;
    stream sock(ex, sc);
    if (auto ec = co_await sock.connect()) {
        q.fail(ec);
        co_return;
    }
    resp::decoder dec;
    try {
        co_await sock.write(asio::buffer(q.request()));
        std::array<char, 1024> buf;
        while (!q.done()) {
            std::size_t n = co_await sock.read_some(asio::buffer(buf));
            dec.feed({buf.data(), n});
            error_code ec;
            while (!q.done()) {
                auto r = dec.next(ec);
                if (ec)
                    q.fail(ec);
                if (ec || !r)
                    break;
                q.feed(*r);
            }
        }
    } catch (const boost::system::system_error&) {
        q.closed();
    }
}

}  // namespace

asio::awaitable<error_code> discover_master(asio::any_io_executor ex, config& cfg, std::string& message)
{
    sentinel_walk walk(cfg.sentinel);
    while (const sentinel_node* node = walk.next()) {
        sentinel_query q(cfg.sentinel);
        if (cfg.connect_timeout.count() == 0) {
            co_await ask(ex, cfg, *node, q);
        } else {
            asio::steady_timer timer(ex, cfg.connect_timeout);
            auto r = co_await (ask(ex, cfg, *node, q) || timer.async_wait(asio::use_awaitable));
            if (r.index() == 1)
                q.fail(error::timeout);
        }
        walk.record(q);
    }
    message = walk.message();
    if (!walk.result()) {
        cfg.host = walk.host();
        cfg.port = walk.port();
        cfg.sentinel.nodes = walk.nodes();
    }
    co_return walk.result();
}

}  // namespace dlock::redis::detail
