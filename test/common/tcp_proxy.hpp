// SPDX-License-Identifier: BSL-1.0
// A fault-injecting TCP proxy in front of a server (redis-server, an etcd member), for
// tests: it can hold the server's replies back (each by a delay, or all until a stall
// ends), answer every command itself with +OK, or drop every connection.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

/// Listens on 127.0.0.1 (a port the OS picks) and relays each connection to
/// 127.0.0.1:`upstream_port`. Runs on its own thread and io_context, so it keeps working
/// while the test thread blocks (waiting for a child process, say). Modes apply to bytes
/// read after the call; every method is thread-safe.
class tcp_proxy {
public:
    /// `resp`: requests are relayed a whole RESP command at a time (so they can be counted
    /// or answered); false: bytes as they come (any protocol, e.g. HTTP to etcd).
    explicit tcp_proxy(std::uint16_t upstream_port, bool resp = true);
    ~tcp_proxy();  // closes every connection and joins the thread
    tcp_proxy(const tcp_proxy&) = delete;
    tcp_proxy& operator=(const tcp_proxy&) = delete;

    std::uint16_t port() const noexcept { return port_; }
    std::string url() const;  ///< redis://127.0.0.1:<port>

    /// Relays both ways without delay (the initial mode).
    void pass_through();
    /// Holds each chunk the server sends for `d` before passing it on (requests still go
    /// through at once, so the server acts on them and only the client is kept waiting).
    void delay_replies(std::chrono::milliseconds d);
    /// Holds back every chunk the server sends from now until `d` from now, then lets them
    /// all go at once (a stall of a given length, as a paused link or a stuck middlebox;
    /// requests still go through). New connections meanwhile are stalled the same way.
    void stall_replies(std::chrono::milliseconds d);
    /// Drops every request from now until pass_through() (a link that lost its way out):
    /// nothing reaches the server, so neither requests nor the client's pings act there.
    void drop_requests();
    /// Bytes drop_requests() has dropped so far.
    std::size_t requests_dropped() const noexcept { return dropped_; }
    /// Forwards nothing: answers each complete RESP command with "+OK\r\n".
    void answer_ok_to_everything();

    /// Closes every relayed connection now (both sides), as a network failure would; new
    /// connections are relayed as before. Returns how many it closed.
    std::size_t drop_connections();
    /// Connections relayed now.
    std::size_t live_connections();

    /// EVAL and EVALSHA commands written to the server so far.
    std::size_t evals_forwarded() const;
    /// Blocks until evals_forwarded() >= n; false if that did not happen within `limit`.
    bool wait_for_evals(std::size_t n, std::chrono::milliseconds limit = std::chrono::seconds(30));
    /// Calls `fn` on the proxy's thread after each EVAL or EVALSHA is written to the server
    /// (for a test whose own thread runs the client's io_context and so cannot block).
    void on_eval_forwarded(std::function<void()> fn);

private:
    struct session;
    boost::asio::awaitable<void> accept_loop();
    boost::asio::awaitable<void> serve(std::shared_ptr<session> s);
    boost::asio::awaitable<void> relay_requests(std::shared_ptr<session> s);
    boost::asio::awaitable<void> relay_replies(std::shared_ptr<session> s);
    static boost::asio::awaitable<void> write_to_client(std::shared_ptr<session> s);
    void count_eval();

    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    std::uint16_t upstream_port_;
    bool resp_ = true;
    std::uint16_t port_ = 0;
    std::vector<std::weak_ptr<session>> sessions_;  // touched on the proxy thread only

    std::atomic<bool> answer_ok_{false};
    std::atomic<bool> drop_requests_{false};
    std::atomic<std::size_t> dropped_{0};
    std::atomic<std::int64_t> delay_ms_{0};
    std::atomic<std::int64_t> stall_until_{0};  // steady_clock ticks: replies wait until then

    mutable std::mutex mutex_;
    std::condition_variable evals_changed_;
    std::size_t evals_ = 0;
    std::function<void()> on_eval_;

    std::thread thread_;  // last: starts once everything above exists
};

}  // namespace dlock::test
