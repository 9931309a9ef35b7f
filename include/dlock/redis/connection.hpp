// SPDX-License-Identifier: BSL-1.0
/// @file
/// One Redis connection: many concurrent requests pipelined over one socket, reconnecting.
#pragma once

#include <dlock/detail/completion.hpp>
#include <dlock/export.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/redis/request.hpp>
#include <dlock/redis/script.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace dlock::redis {

/// Counters a caller can read at any time (on the connection's executor).
struct connection_stats {
    std::uint64_t requests = 0;          ///< requests accepted by async_exec
    std::uint64_t batches = 0;           ///< socket writes (each carries every queued request)
    std::uint64_t connects = 0;          ///< successful (re)connections
    std::uint64_t connect_failures = 0;  ///< connection attempts that failed
    std::uint64_t timeouts = 0;          ///< requests completed with error::timeout
    std::uint64_t cancelled = 0;         ///< requests completed with operation_aborted
    std::uint64_t noscript_reloads = 0;  ///< EVALSHA calls sent again as EVAL (the server lost its script cache)
};

/// A pipelined RESP2 connection over TCP, TLS or a unix socket.
///
/// - Executor: all calls and all handlers run on the connection's executor, which must be
///   single-threaded (an io_context run by one thread, or a strand). Not thread-safe.
/// - Pipelining: every request queued while a write is in progress goes out in the next
///   single write; replies are matched to requests in FIFO order. A read of many replies
///   pauses every 16 of them to let the requests their handlers made go out, so the server
///   works on those while the rest are dispatched.
/// - Reconnection: after any I/O error the requests on the wire fail with
///   error::connection_lost; queued ones wait for the next connection (bounded by their
///   timeout); reconnects back off exponentially, each wait drawn from
///   [d/2, d] (equal jitter).
/// - Completion: a request ended by I/O (its reply, or the loss of the connection it was
///   written on) completes from the read loop at once, on the handler's executor; one ended
///   any other way (rejected, cancelled, timed out, closed) is posted. Never inside the
///   initiating call.
/// - Lifetime: the destructor closes the connection; pending operations then complete with
///   error::closed. Background work keeps internal state alive, never the user's objects.
/// @threadsafety None: one single-threaded executor (see above).
class DLOCK_API connection {
public:
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// async_exec's completion: the error, and one reply per command.
    using exec_signature = void(boost::system::error_code, response);
    /// async_eval's completion: the error, and the script's reply.
    using script_signature = void(boost::system::error_code, reply);
    /// async_connect's completion.
    using connect_signature = void(boost::system::error_code);

    /// Does no I/O: the first operation (or async_connect) connects.
    connection(executor_type ex, config cfg);
    /// Closes the connection (as close()).
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    /// The executor every call and handler runs on.
    executor_type get_executor() const noexcept;
    /// The settings it was built with.
    const config& get_config() const noexcept;

    /// Connects (if not connected) and completes when the next connection attempt finishes
    /// (at once, posted, if connected). The connection keeps retrying in the background
    /// after a failure.
    /// @completion connect_signature: `void(error_code)`.
    /// @errors auth_failed, connect_failed, resolve_failed, tls_failed, timeout,
    /// handshake_failed, closed.
    /// @cancellation Terminal, partial, total: operation_aborted; stops waiting only (the
    /// attempt goes on).
    template <class Token = boost::asio::deferred_t>
    auto async_connect(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, connect_signature>(
            [this](auto handler) { connect_impl(std::move(handler)); }, token);
    }

    /// Sends `req` (copied: the caller may reuse it) and completes with one reply per
    /// command, within config::request_timeout.
    /// @completion exec_signature: `void(error_code, response)`.
    /// @errors server_error if any reply is an error reply (the response still holds every
    /// reply and the server's text); timeout, connection_lost (the request was on the wire:
    /// it may have run), closed.
    /// @cancellation A request not yet written is removed (terminal, partial, total); a
    /// written one completes at once with operation_aborted and its reply is read and dropped
    /// later (terminal, partial; total has no effect), so the stream stays in sync. The
    /// command may then have run.
    template <class Token = boost::asio::deferred_t>
    auto async_exec(const request& req, Token&& token = {})
    {
        return async_exec(req, get_config().request_timeout, std::forward<Token>(token));
    }

    /// As async_exec(const request&, Token&&), with `timeout` instead of
    /// config::request_timeout (zero: no limit).
    /// @completion exec_signature: `void(error_code, response)`.
    /// @errors As the overload above.
    /// @cancellation As the overload above.
    template <class Token = boost::asio::deferred_t>
    auto async_exec(const request& req, std::chrono::milliseconds timeout, Token&& token = {})
    {
        return boost::asio::async_initiate<Token, exec_signature>(
            [this](auto handler, const request* r, std::chrono::milliseconds t) {
                const bool direct = dlock::detail::completes_in_place(handler, get_executor());  // before the move
                exec_impl(*r, t, std::move(handler), false, direct);
            },
            token, &req, timeout);
    }

    /// Like async_exec, but only on the connection `generation` (see generation()): it fails
    /// with error::connection_lost at once if that connection is not up now, and if it drops
    /// before the request is written (it is never written on a later connection). For
    /// requests that rely on the state of one connection, such as WATCH before MULTI/EXEC.
    /// @completion exec_signature: `void(error_code, response)`.
    /// @errors As async_exec; connection_lost also as said above.
    /// @cancellation As async_exec.
    template <class Token = boost::asio::deferred_t>
    auto async_exec_pinned(const request& req, std::uint64_t generation, Token&& token = {})
    {
        return boost::asio::async_initiate<Token, exec_signature>(
            [this](auto handler, const request* r, std::uint64_t g) { pinned_impl(*r, g, std::move(handler)); }, token,
            &req, generation);
    }
    /// Names the current connection: changes each time a connection ends. With
    /// is_connected(), what async_exec_pinned needs.
    std::uint64_t generation() const noexcept;

    /// Runs `s` with EVALSHA, retrying once with EVAL if the server lost its script cache.
    /// @completion script_signature: `void(error_code, reply)` with the script's reply.
    /// @errors As async_exec.
    /// @cancellation As async_exec.
    template <class Token = boost::asio::deferred_t>
    auto async_eval(const script& s, std::span<const std::string> keys, std::span<const std::string> args,
                    Token&& token = {})
    {
        return boost::asio::async_initiate<Token, script_signature>(
            [this](auto handler, const script* sc, std::span<const std::string> k, std::span<const std::string> a) {
                const bool direct = dlock::detail::completes_in_place(handler, get_executor());
                eval_impl(*sc, k, a, std::move(handler), direct);
            },
            token, &s, keys, args);
    }

    /// The same with the keys and arguments already encoded (no string per key).
    /// @completion script_signature: `void(error_code, reply)` with the script's reply.
    /// @errors As async_exec.
    /// @cancellation As async_exec.
    template <class Token = boost::asio::deferred_t>
    auto async_eval(const script& s, script_args args, Token&& token = {})
    {
        return boost::asio::async_initiate<Token, script_signature>(
            [this](auto handler, const script* sc, script_args a) {
                const bool direct = dlock::detail::completes_in_place(handler, get_executor());
                eval_impl(*sc, std::move(a), std::move(handler), direct);
            },
            token, &s, std::move(args));
    }

    /// Closes the socket, stops reconnecting and fails everything pending with error::closed.
    void close();

    /// Drops the current connection and connects again now (say, Sentinel announced a new
    /// master): requests on the wire fail with connection_lost, queued ones wait for it.
    void reconnect();

    /// Connected and past the handshake right now.
    bool is_connected() const noexcept;
    /// Counters since construction.
    const connection_stats& stats() const noexcept;
    /// The server's text from the last failed handshake (AUTH, SELECT), for diagnostics.
    const std::string& last_server_message() const noexcept;

    /// For subscriber-mode users (redis::subscriber): every reply goes to `on_push` instead
    /// of a request; `on_connected` runs after each handshake, before queued requests are
    /// written. Set before the first connect.
    struct push_hooks {
        /// Every reply read while in push mode.
        std::function<void(reply&&)> on_push;
        /// After each successful handshake, before queued requests go out.
        std::function<void()> on_connected;
        /// When an established connection drops (reconnecting follows).
        std::function<void(boost::system::error_code)> on_disconnected;
    };
    /// Switches to push mode (see push_hooks); call before the first connect.
    void set_push_mode(push_hooks hooks);
    /// Subscriber mode: write a command whose answers arrive through on_push.
    void send(const request& req, bool before_queued = false);
    /// The same, taking the request's bytes instead of copying them.
    void send(request&& req, bool before_queued = false);

private:
    void connect_impl(boost::asio::any_completion_handler<connect_signature> h);
    void exec_impl(const request& req, std::chrono::milliseconds timeout,
                   boost::asio::any_completion_handler<exec_signature> h, bool pinned = false, bool direct = false);
    // The same with the request's bytes moved in (a script call's: built for this send).
    void exec_owned(std::string payload, std::size_t commands, std::chrono::milliseconds timeout,
                    boost::asio::any_completion_handler<exec_signature> h, bool pinned = false, bool direct = false);
    void pinned_impl(const request& req, std::uint64_t generation,
                     boost::asio::any_completion_handler<exec_signature> h);
    void eval_impl(const script& s, std::span<const std::string> keys, std::span<const std::string> args,
                   boost::asio::any_completion_handler<script_signature> h, bool direct = false);
    void eval_impl(const script& s, script_args&& args, boost::asio::any_completion_handler<script_signature> h,
                   bool direct = false);

    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace dlock::redis
