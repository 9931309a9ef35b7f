// SPDX-License-Identifier: BSL-1.0
// The request pipe, sans-io: one connection to a store, requests in FIFO order, a connection
// made on demand (or kept, with the shared jittered backoff), per-request deadlines, and
// which requests a broken connection fails (those that may have run) and which wait for the
// next one (those that never left). It holds ids, phases and deadlines only: bodies, replies
// and handlers stay in the driver (memcached, MariaDB), which performs the actions in order.
// Tested alone with a fake clock (test/unit/common/request_pipe_test.cpp).
//
// By state (Q: queued, never sent; F: on the wire; "issue": send what the bound allows):
//   idle         request: queue, connect. timer: expire Q. close: closed.
//   connecting   request: queue. connected: up, issue. connect_failed(e): fail Q with e,
//                then idle (on demand) or backing_off (persistent). timer: expire Q.
//                abort: fail Q with connect_failed, reset. close: fail Q, reset.
//   ready        request/written: issue. reply(id, e, keep): complete it; keep: issue, else
//                down, reset. not_sent: F back to the head of Q, down, reset. dropped(e) and
//                abort: fail F with e (connection_lost), down, reset. timer: expire Q; a sent
//                one expired: it times out, the rest of F fail, down, reset. close: fail F+Q.
//   resetting    request: queue. reset_done: connect if Q or persistent, else idle.
//   backing_off  request: queue. timer: connect when due; expire Q.
//   closed       request: complete(closed); nothing else.
// Inputs that name an older connection (`gen`) are ignored in every state.
#pragma once

#include "common/backoff.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace dlock::detail {

struct pipe_config {
    /// Requests on the wire at once: 0 for no bound (memcached pipelines), 1 for SQL.
    std::size_t max_in_flight = 1;
    /// Requests go out in batches that end with `flush`; the next batch waits for `written`.
    bool batches = false;
    /// Connect at start() and again after every drop, backing off after a failed connect.
    bool persistent = false;
    /// A deadline counts from the request (queue wait and connect included), else from its send.
    bool deadline_from_request = false;
    std::chrono::milliseconds request_timeout{5000};                ///< 0: none; a request may bring its own
    std::chrono::milliseconds backoff_min{100}, backoff_max{2000};  ///< persistent only
    /// The store refused its configuration: every request fails with invalid_option, nothing connects.
    bool refused = false;
};

/// The SQL connections' pipe (PostgreSQL, MariaDB): one query at a time, its deadline from its send.
inline pipe_config one_query_at_a_time(std::chrono::milliseconds request_timeout, bool refused, bool persistent = false)
{
    pipe_config c;
    c.request_timeout = request_timeout;
    c.refused = refused;
    c.persistent = persistent;
    return c;
}

enum class pipe_state : std::uint8_t {
    idle,         ///< no connection
    connecting,   ///< `connect` is being performed
    ready,        ///< connected: requests go out
    resetting,    ///< the old connection is being ended; no new one until it is gone
    backing_off,  ///< persistent: a connect failed, the next is due at the timer
    closed
};

/// One effect for the driver, a flat struct so that tests read it field by field.
struct pipe_action {
    enum class type : std::uint8_t {
        connect,       ///< make connection `gen` (resolve, connect, handshake, setup); answer
                       ///< with on_connected or on_connect_failed (the driver's own bound)
        write,         ///< send request `id` on connection `gen`
        flush,         ///< batches: the writes so far leave as one; answer with on_written
        reset,         ///< end connection `gen`; answer with on_reset_done once it is gone
        set_timer,     ///< (re)arm the one timer for `at`; answer with on_timer
        cancel_timer,  ///< no deadline any more
        complete,      ///< request `id` ends: `ec`, or its reply when `ec` is empty
        up,            ///< connection `gen` is ready
        down           ///< connection `gen`, which was ready, is gone
    };
    type t;
    std::uint64_t gen = 0;
    std::uint64_t id = 0;
    boost::system::error_code ec{};
    std::chrono::steady_clock::time_point at{};
};

class request_pipe {
public:
    using clock_type = std::chrono::steady_clock;
    using time_point = clock_type::time_point;
    using milliseconds = std::chrono::milliseconds;

    request_pipe(pipe_config cfg, std::minstd_rand& rng);

    /// A request `id` (unique, chosen by the driver) bounded by `timeout` (0: request_timeout).
    void on_request(std::uint64_t id, milliseconds timeout, time_point now);
    void on_start(time_point now);  ///< persistent: connect now
    void on_connected(std::uint64_t gen, time_point now);
    void on_connect_failed(std::uint64_t gen, boost::system::error_code ec, time_point now);
    void on_written(std::uint64_t gen, time_point now);
    /// The oldest request on the wire answered; !keep: the connection is no longer usable.
    void on_reply(std::uint64_t gen, std::uint64_t id, boost::system::error_code ec, bool keep, time_point now);
    /// What was written provably never left (a connection found dead before the send).
    void on_not_sent(std::uint64_t gen, time_point now);
    /// The connection broke; what is on the wire may have run and fails with `ec`.
    void on_dropped(std::uint64_t gen, boost::system::error_code ec, time_point now);
    void on_reset_done(std::uint64_t gen, time_point now);
    void on_timer(time_point now);
    /// End the connection now (a request on it fails with connection_lost; queued ones wait).
    void on_abort(time_point now);
    void on_close();

    pipe_state state() const noexcept { return state_; }
    std::uint64_t gen() const noexcept { return gen_; }
    /// The oldest request on the wire (the one the next reply answers), 0 if none.
    std::uint64_t oldest_in_flight() const noexcept { return sent_.empty() ? 0 : sent_.front().id; }
    std::size_t queued() const noexcept { return queued_.size(); }
    std::size_t in_flight() const noexcept { return sent_.size(); }
    /// The effects so far, in order; the driver takes them (and clears the list).
    std::vector<pipe_action>& actions() noexcept { return actions_; }

private:
    struct entry {
        std::uint64_t id;
        milliseconds timeout;
        time_point deadline;  // max(): none (or not sent yet, when dated from the send)
    };

    void emit(pipe_action::type t, std::uint64_t id = 0, boost::system::error_code ec = {});
    void connect();
    void issue(time_point now);
    void fail(std::deque<entry>& q, boost::system::error_code ec);
    void end_connection(boost::system::error_code in_flight_ec);
    bool expire_queued(time_point now);
    void rearm();
    time_point deadline_of(milliseconds timeout, time_point from) const;

    pipe_config cfg_;
    std::minstd_rand& rng_;
    backoff backoff_;
    pipe_state state_ = pipe_state::idle;
    std::uint64_t gen_ = 0;  // grows per connect; older inputs are ignored
    bool writing_ = false;   // batches: a flush is under way
    std::deque<entry> queued_, sent_;
    time_point retry_at_ = time_point::max();  // backing_off: when to connect again
    time_point armed_ = time_point::max();     // the driver's timer: due no later than the earliest deadline
    std::vector<pipe_action> actions_;
};

}  // namespace dlock::detail
