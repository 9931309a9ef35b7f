// SPDX-License-Identifier: BSL-1.0
/// @file
/// A connection in subscribe mode: shared channel subscriptions with per-channel refcounts.
#pragma once

#include <dlock/export.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/connection.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

namespace dlock::redis {

/// What a listener is told about its channel.
enum class event_kind : std::uint8_t {
    subscribed,    ///< the server confirmed the subscription: messages from now on arrive
    message,       ///< a message was published on the channel
    disconnected,  ///< the connection dropped: messages may be lost until resubscribed
    resubscribed,  ///< subscribed again after a reconnect: re-check any state you wait on
};

/// One thing that happened on a channel, as a subscription receives it.
struct event {
    event_kind kind = event_kind::message;  ///< what happened
    std::string channel;                    ///< the channel it happened on
    std::string payload;                    ///< a message's text (empty for the other kinds)
};

/// Subscribes channels on its own connection. The first listener of a channel sends
/// SUBSCRIBE, the last one to leave sends UNSUBSCRIBE; after a reconnect every channel is
/// subscribed again and each listener gets `resubscribed`.
/// Executor and thread safety as redis::connection. Listeners run on the executor, from
/// the reading loop: they must not block; they may add or remove listeners.
/// @threadsafety None: one single-threaded executor, as redis::connection.
class DLOCK_API subscriber {
public:
    /// What a listener is called with.
    using listener = std::function<void(const event&)>;
    /// Names one listener for unlisten().
    using listener_id = std::uint64_t;

    /// Opens its own connection (in push mode) on first use.
    subscriber(boost::asio::any_io_executor ex, config cfg);
    /// Closes the connection; no listener is called afterwards.
    ~subscriber();
    subscriber(const subscriber&) = delete;
    subscriber& operator=(const subscriber&) = delete;

    /// The executor every call and listener runs on.
    boost::asio::any_io_executor get_executor() const noexcept;

    /// Connects the subscriber's connection, as connection::async_connect.
    /// @completion `void(error_code)`.
    /// @errors As connection::async_connect.
    /// @cancellation As connection::async_connect.
    template <class Token = boost::asio::deferred_t>
    auto async_connect(Token&& token = {})
    {
        return conn_.async_connect(std::forward<Token>(token));
    }

    /// Adds a listener to `channel`. It gets `subscribed` once the server has confirmed the
    /// subscription (at once, posted, if it already was), then messages and connection events.
    listener_id listen(const std::string& channel, listener cb);

    /// Removes a listener; no callback reaches it after this returns.
    void unlisten(listener_id id);

    /// Is `channel` subscribed and confirmed right now?
    bool is_subscribed(const std::string& channel) const;
    /// Channels with at least one listener.
    std::size_t channel_count() const noexcept;
    /// Listeners over all channels.
    std::size_t listener_count() const noexcept;
    /// The underlying connection's counters.
    const connection_stats& stats() const noexcept { return conn_.stats(); }

    /// Closes the connection and stops reconnecting.
    void close();
    /// Drops the connection and connects again now; channels are subscribed again.
    void reconnect() { conn_.reconnect(); }
    /// The connection's settings (through Sentinel: the master it found last).
    const config& get_config() const noexcept { return conn_.get_config(); }
    /// Connected and past the handshake right now.
    bool is_connected() const noexcept { return conn_.is_connected(); }

private:
    struct state;
    std::shared_ptr<state> state_;
    connection conn_;
};

/// An awaitable view of one channel: queues events until `async_receive` takes them.
/// Destroying the subscription unlistens.
/// @threadsafety None: use it on the subscriber's executor.
class DLOCK_API subscription {
public:
    /// Starts listening on `channel` (subscribing if it is the first listener).
    subscription(subscriber& sub, const std::string& channel);
    /// Stops listening (unsubscribing if it was the last listener).
    ~subscription();
    subscription(const subscription&) = delete;
    subscription& operator=(const subscription&) = delete;

    /// Takes the next event (at once, posted, if one is queued). The operation starts on
    /// `this`: start it (e.g. a deferred one) while the subscription lives.
    /// @completion `void(error_code, event)`.
    /// @errors invalid_request (another async_receive is pending), closed (the subscription
    /// was destroyed meanwhile).
    /// @cancellation Terminal, partial, total: operation_aborted; the next event stays queued.
    template <class Token = boost::asio::deferred_t>
    auto async_receive(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, void(boost::system::error_code, event)>(
            [this](auto handler) { receive_impl(std::move(handler)); }, token);
    }

    /// Events received and not yet taken by async_receive.
    std::size_t queued() const noexcept;

private:
    void receive_impl(boost::asio::any_completion_handler<void(boost::system::error_code, event)> h);
    struct state;
    subscriber& sub_;
    std::shared_ptr<state> state_;
    subscriber::listener_id id_;
};

}  // namespace dlock::redis
