// SPDX-License-Identifier: BSL-1.0
/*
 * http_endpoint: a lock per resource inside an HTTP server, composed with a timeout, the
 * client's disconnect and the server's shutdown.
 *
 * POST /counter/{id} increments the Redis key "counter:{id}" by a read-modify-write (GET,
 * then SET: two round trips that concurrent requests would interleave) under the lock
 * "counter:{id}", and answers with the new value. GET /counter/{id} reads it. Run several
 * servers against one Redis and the counts stay exact.
 *
 * The wait for the lock is one `||` of three awaitables: the lock, a timer (--lock-timeout:
 * then 503 with Retry-After) and the client going away. Whichever completes first cancels the
 * others; a cancelled acquire leaves no waiter behind. Shutdown (SIGINT, SIGTERM, --duration)
 * closes every connection, so handlers waiting for a lock stop like on a disconnect, while
 * one inside its read-modify-write finishes it first.
 *
 * Usage: http_endpoint [--url URL] [--port 8080] [--lock-timeout 2s] [--duration 0]
 *   --url           else $DLOCK_URL, else redis://127.0.0.1:6379
 *   --port          on 127.0.0.1; 0 picks a free port
 *   --lock-timeout  longest wait for a busy resource before answering 503
 *   --duration      stop after this long (0, the default: run until SIGINT / SIGTERM)
 * Prints "listening on PORT" once it accepts connections, and a line per request that did
 * not get its lock ("busy ..." for a 503, "gone ..." for a client that left while waiting).
 * Errors: one line on stderr; status 1 (Redis unreachable, port taken), 2 (bad flags).
 */
#include <dlock/dlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct options {
    std::string url;
    unsigned short port = 8080;
    std::chrono::milliseconds lock_timeout{2s};
    std::chrono::milliseconds duration{0};
};

// What every connection shares. Single-threaded: one io_context, one thread.
struct server {
    dlock::redis_store& store;
    dlock::registry& locks;
    const options& opts;
    tcp::acceptor acceptor;
    std::set<tcp::socket*> connections;
    bool stopping = false;

    // Closing a connection wakes whatever its handler waits on, like a client disconnect.
    void shutdown()
    {
        if (stopping)
            return;
        stopping = true;
        boost::system::error_code ignored;
        acceptor.close(ignored);
        for (auto* s : connections)
            s->close(ignored);
        close_store_when_idle();
    }
    void close_store_when_idle()
    {
        if (stopping && connections.empty())
            store.close();  // the last handler is done: io.run() can return
    }
};

using response = http::response<http::string_body>;

response make_response(http::status status, std::string body)
{
    response res{status, 11};
    res.set(http::field::content_type, "text/plain");
    res.body() = std::move(body);
    return res;
}

// Completes when the client has closed or reset the connection, or the server closed it.
// Bytes of a pipelined next request are not "gone": they stay for the next read.
asio::awaitable<void> client_gone(tcp::socket& socket)
{
    auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec)
        co_return;  // closed by shutdown, or cancelled because the lock wait ended first
    char byte;
    if (socket.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, ec) == 0 || ec)
        co_return;  // end of stream or reset
    asio::steady_timer until_cancelled(socket.get_executor(), asio::steady_timer::time_point::max());
    co_await until_cancelled.async_wait(use_tuple);
}

// The read-modify-write the lock protects: without it, two requests could both read n and
// both write n + 1.
asio::awaitable<long long> increment(dlock::redis::connection& redis, const std::string& key)
{
    dlock::redis::request get;
    get.push("GET", key);
    auto value = co_await redis.async_exec(get, asio::use_awaitable);
    long long n = 0;
    if (!value[0].is_nil())
        std::from_chars(value[0].str.data(), value[0].str.data() + value[0].str.size(), n);
    dlock::redis::request set;
    set.push("SET", key, n + 1);
    co_await redis.async_exec(set, asio::use_awaitable);
    co_return n + 1;
}

// nullopt: the client left before an answer was due.
asio::awaitable<std::optional<response>> post_counter(server& srv, tcp::socket& socket, const std::string& name)
{
    asio::steady_timer timer(socket.get_executor(), srv.opts.lock_timeout);
    // Every branch reports errors as values, so `||` settles on whichever completes first:
    // Asio 1.26's `||` waits for the first branch that does not throw, and a thrown error
    // would keep it waiting for the others. (lock.acquire_for(d) is the one-call alternative.)
    auto lock = srv.locks.obtain(name);
    auto first = co_await (lock.acquire(use_tuple) || timer.async_wait(use_tuple) || client_gone(socket));
    if (first.index() == 2) {
        std::cout << "gone " << name << ": " << (srv.stopping ? "shutting down" : "the client left")
                  << " while waiting for the lock" << std::endl;
        co_return std::nullopt;
    }
    if (first.index() == 1) {
        std::cout << "busy " << name << ": no lock within " << srv.opts.lock_timeout.count() << " ms" << std::endl;
        auto res = make_response(http::status::service_unavailable, "busy, try again\n");
        res.set(http::field::retry_after, "1");
        co_return res;
    }
    auto& [ec, g] = std::get<0>(first);
    if (ec)
        co_return make_response(http::status::service_unavailable, "lock: " + ec.message() + "\n");

    auto [failure, value] =
        co_await asio::co_spawn(socket.get_executor(), increment(srv.store.connection(), name), use_tuple);
    auto [released] = co_await g.release(use_tuple);
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            co_return make_response(http::status::internal_server_error, std::string("redis: ") + e.what() + "\n");
        }
    }
    // The lease ended before we were done (a stall longer than the lease): another holder may
    // have run meanwhile, so do not claim success.
    if (released == dlock::error::lock_lost)
        co_return make_response(http::status::internal_server_error, "lock lost during the update\n");
    co_return make_response(http::status::ok, std::to_string(value) + "\n");
}

asio::awaitable<std::optional<response>> handle(server& srv, tcp::socket& socket,
                                                const http::request<http::string_body>& req)
{
    constexpr std::string_view prefix = "/counter/";
    std::string_view target = req.target();
    if (target.substr(0, prefix.size()) != prefix)
        co_return make_response(http::status::not_found, "try /counter/{id}\n");
    std::string_view id = target.substr(prefix.size());
    if (id.empty() || id.size() > 100 || id.find_first_of("/?# ") != std::string_view::npos)
        co_return make_response(http::status::bad_request, "bad id\n");
    std::string name = "counter:" + std::string(id);  // lock name and Redis key alike

    if (req.method() == http::verb::post)
        co_return co_await post_counter(srv, socket, name);
    if (req.method() == http::verb::get) {
        dlock::redis::request get;
        get.push("GET", name);
        auto [ec, value] = co_await srv.store.connection().async_exec(get, use_tuple);
        if (ec)
            co_return make_response(http::status::internal_server_error, "redis: " + ec.message() + "\n");
        co_return make_response(http::status::ok, (value[0].is_nil() ? "0" : value[0].str) + "\n");
    }
    auto res = make_response(http::status::method_not_allowed, "GET or POST\n");
    res.set(http::field::allow, "GET, POST");
    co_return res;
}

asio::awaitable<void> session(server& srv, tcp::socket socket)
{
    srv.connections.insert(&socket);
    boost::beast::flat_buffer buffer;
    for (;;) {
        http::request<http::string_body> req;
        auto [rec, n] = co_await http::async_read(socket, buffer, req, use_tuple);
        if (rec)
            break;  // the client closed, sent garbage, or the server is shutting down
        auto res = co_await handle(srv, socket, req);
        if (!res)
            break;
        res->keep_alive(req.keep_alive() && !srv.stopping);
        res->prepare_payload();
        auto [wec, m] = co_await http::async_write(socket, *res, use_tuple);
        if (wec || !res->keep_alive())
            break;
    }
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    srv.connections.erase(&socket);
    srv.close_store_when_idle();
}

asio::awaitable<void> serve(server& srv)
{
    co_await srv.store.connection().async_connect();  // fail fast if Redis is unreachable
    std::cout << "listening on " << srv.acceptor.local_endpoint().port() << std::endl;
    for (;;) {
        auto [ec, socket] = co_await srv.acceptor.async_accept(use_tuple);
        if (ec == asio::error::operation_aborted || srv.stopping)
            co_return;
        if (!ec)
            asio::co_spawn(srv.acceptor.get_executor(), session(srv, std::move(socket)), asio::detached);
    }
}

bool parse(int argc, char** argv, options& o)
{
    const char* env = std::getenv("DLOCK_URL");
    o.url = env ? env : "redis://127.0.0.1:6379";
    if (argc % 2 == 0) {
        std::cerr << "usage: http_endpoint [--url URL] [--port 8080] [--lock-timeout 2s] [--duration 0]\n";
        return false;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string_view flag = argv[i], value = argv[i + 1];
        bool ok = true;
        if (flag == "--url") {
            o.url = value;
        } else if (flag == "--port") {
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), o.port);
            ok = ec == std::errc() && end == value.data() + value.size();
        } else if (flag == "--lock-timeout") {
            ok = dlock::redis::parse_duration(value, o.lock_timeout);
        } else if (flag == "--duration") {
            ok = dlock::redis::parse_duration(value, o.duration);
        } else {
            ok = false;
        }
        if (!ok) {
            std::cerr << "http_endpoint: bad flag " << flag << ' ' << value << '\n';
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv)
{
    options o;
    if (!parse(argc, argv, o))
        return 2;
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(o.url, cfg, err)) {
        std::cerr << "http_endpoint: " << err.message << '\n';
        return 2;
    }

    asio::io_context io;
    dlock::redis_store store(io.get_executor(), cfg);
    dlock::registry locks(store);  // 30 s leases, renewed while a handler holds one
    int status = 0;
    try {
        server srv{store, locks, o, tcp::acceptor(io, {asio::ip::address_v4::loopback(), o.port}), {}};
        asio::signal_set signals(io, SIGINT, SIGTERM);
        signals.async_wait([&](boost::system::error_code ec, int) {
            if (!ec)
                srv.shutdown();
        });
        asio::steady_timer deadline(io, o.duration);
        if (o.duration.count() > 0)
            deadline.async_wait([&](boost::system::error_code ec) {
                if (!ec)
                    srv.shutdown();
            });
        asio::co_spawn(io, serve(srv), [&](std::exception_ptr e) {
            if (e)
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::cerr << "http_endpoint: " << x.what() << '\n';
                    status = 1;
                }
            srv.shutdown();
            signals.cancel();
            deadline.cancel();
        });
        io.run();
    } catch (const std::exception& e) {  // the port is taken, or similar
        std::cerr << "http_endpoint: " << e.what() << '\n';
        return 1;
    }
    return status;
}
