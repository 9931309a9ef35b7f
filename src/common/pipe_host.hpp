// SPDX-License-Identifier: BSL-1.0
// What every driver of a request pipe (src/common/request_pipe.hpp) does the same way: it
// feeds the machine an input with the time, then performs the actions in order, inputs
// raised meanwhile appended to the same loop (never a nested one); the one timer is kept
// here. The driver (memcached, MariaDB, PostgreSQL) performs the rest: connect, write, flush, reset,
// complete, up, down.
#pragma once

#include "common/action_loop.hpp"
#include "common/request_pipe.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlock::detail {

/// `Driver` derives from this and from std::enable_shared_from_this<Driver>, and has
/// `void perform(const pipe_action&)`. `Request` is the driver's side of a request (its
/// body, handler and reply), kept here by the pipe's id.
template <class Driver, class Request>
class pipe_host {
public:
    pipe_host(const boost::asio::any_io_executor& ex, pipe_config cfg)
        : rng_(std::random_device{}()), pipe(cfg, rng_), timer_(ex)
    {
    }

    /// `f(pipe, now)` feeds one input; its actions are performed before this returns
    /// (unless an outer call is performing already: then that loop performs them).
    template <class F>
    void input(F&& f)
    {
        std::forward<F>(f)(pipe, request_pipe::clock_type::now());
        perform_in_order(pipe.actions(), performing_, [this](const pipe_action& a) { handle(a); });
    }

    /// A new request: its id for the pipe.
    std::uint64_t add_request(Request r)
    {
        auto id = ++next_id_;
        requests_.emplace(id, std::move(r));
        return id;
    }
    Request* find_request(std::uint64_t id)
    {
        auto it = requests_.find(id);
        return it == requests_.end() ? nullptr : &it->second;
    }
    /// The request the pipe completes (empty if it is gone already).
    std::optional<Request> take_request(std::uint64_t id)
    {
        auto it = requests_.find(id);
        if (it == requests_.end())
            return std::nullopt;
        std::optional<Request> r(std::move(it->second));
        requests_.erase(it);
        return r;
    }
    /// The connect of generation `gen` ended; `ec`: how it failed.
    void connect_ended(std::uint64_t gen, boost::system::error_code ec)
    {
        input([&](request_pipe& p, request_pipe::time_point now) {
            if (ec)
                p.on_connect_failed(gen, ec, now);
            else
                p.on_connected(gen, now);
        });
    }
    /// The SQL drivers' failed connect: the requests waiting for it (not written) fail with
    /// `why`, the client library's text, as their reply's message.
    void connect_failed_text(const std::string& why)
    {
        for (auto& [id, r] : requests_)
            if (!r.written)
                r.res.message = why;
    }

protected:
    std::minstd_rand rng_;
    request_pipe pipe;

private:
    void handle(const pipe_action& a)
    {
        using type = pipe_action::type;
        if (a.t == type::cancel_timer)
            return void(timer_.cancel());
        if (a.t != type::set_timer)
            return static_cast<Driver*>(this)->perform(a);
        timer_.expires_at(a.at);
        timer_.async_wait([weak = static_cast<Driver*>(this)->weak_from_this()](boost::system::error_code ec) {
            if (auto self = weak.lock(); self && !ec)  // an early one is harmless: the machine re-arms
                self->input([](request_pipe& p, request_pipe::time_point now) { p.on_timer(now); });
        });
    }

    boost::asio::steady_timer timer_;
    bool performing_ = false;
    std::unordered_map<std::uint64_t, Request> requests_;
    std::uint64_t next_id_ = 0;
};

}  // namespace dlock::detail
