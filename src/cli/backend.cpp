#include "cli/backend.hpp"

#include <dlock/redis/cluster_store.hpp>
#include <dlock/error.hpp>
#include <dlock/redis/store.hpp>
#include <dlock/redis/redlock_store.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace dlock::cli {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string describe(const redis::config& c)
{
    if (!c.sentinel.master_name.empty()) {
        std::string s = "sentinel master '" + c.sentinel.master_name + "' via";
        for (const auto& n : c.sentinel.nodes)
            s += " " + n.host + ":" + std::to_string(n.port);
        return s;
    }
    if (c.kind == redis::transport::unix_socket)
        return "unix:" + c.path;
    return (c.kind == redis::transport::tls ? "rediss://" : "redis://") + c.host + ":" + std::to_string(c.port);
}

std::string describe(const std::vector<redis::config>& nodes)
{
    std::string s;
    for (const auto& n : nodes)
        s += (s.empty() ? "" : ", ") + describe(n);
    return s;
}

}  // namespace

backend make_backend(const options& o, asio::any_io_executor ex)
{
    backend b;
    b.where = describe(o.servers);
    if (o.topology == topology::cluster) {
        auto st = std::make_unique<cluster_store>(ex, o.servers);
        auto* p = st.get();
        b.connect = [p](std::string&) -> asio::awaitable<error_code> {
            auto [ec] = co_await p->async_refresh(use_tuple);
            co_return ec;
        };
        // The slot map is cached: ask the cluster again.
        b.reachable = [p]() -> asio::awaitable<bool> {
            auto [ec] = co_await p->async_refresh(use_tuple);
            co_return !ec;
        };
        b.close = [p] { p->close(); };
        b.lock_key = [p](const std::string& n) { return p->lock_key(n); };
        b.where = "cluster " + b.where;
        b.st = std::move(st);
    } else if (o.topology == topology::redlock) {
        auto st = std::make_unique<redlock_store>(ex, o.servers);
        auto* p = st.get();
        // Every node is tried; a quorum of them must answer.
        b.connect = [p](std::string& detail) -> asio::awaitable<error_code> {
            std::size_t ok = 0;
            for (std::size_t i = 0; i < p->size(); ++i) {
                auto [ec] = co_await p->node(i).connection().async_connect(use_tuple);
                if (!ec)
                    ++ok;
                else
                    detail += (detail.empty() ? "" : "; ") + std::string("node ") + std::to_string(i + 1) + ": " +
                              ec.message();
            }
            co_return ok >= p->quorum() ? error_code() : error_code(error::no_quorum);
        };
        b.reachable = [p]() -> asio::awaitable<bool> {
            std::size_t up = 0;
            for (std::size_t i = 0; i < p->size(); ++i)
                up += p->node(i).connection().is_connected();
            co_return up >= p->quorum();
        };
        b.close = [p] { p->close(); };
        b.lock_key = [p](const std::string& n) { return p->node(0).lock_key(n); };
        b.where = "redlock over " + b.where;
        b.st = std::move(st);
    } else {
        auto st = std::make_unique<redis_store>(ex, o.servers.front());
        auto* p = st.get();
        b.connect = [p](std::string& detail) -> asio::awaitable<error_code> {
            auto [ec] = co_await p->connection().async_connect(use_tuple);
            if (ec)
                detail = p->connection().last_server_message();
            co_return ec;
        };
        b.reachable = [p]() -> asio::awaitable<bool> { co_return p->connection().is_connected(); };
        b.close = [p] { p->close(); };
        b.lock_key = [p](const std::string& n) { return p->lock_key(n); };
        b.st = std::move(st);
    }
    return b;
}

}  // namespace dlock::cli
