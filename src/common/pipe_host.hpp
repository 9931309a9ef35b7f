// SPDX-License-Identifier: BSL-1.0
// What every driver of a request pipe (src/common/request_pipe.hpp) does the same way: it
// feeds the machine an input with the time, then performs the actions in order, inputs
// raised meanwhile appended to the same loop (never a nested one); the one timer is kept
// here. The driver (memcached, MariaDB, PostgreSQL) performs the rest through named hooks:
// on_connect, on_write, on_flush, on_reset, on_complete, on_up, on_down.
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

/// `Driver` derives from this and from std::enable_shared_from_this<Driver>, and has the
/// hooks `on_connect(gen)`, `on_write(gen, id)`, `on_reset(gen)` and `on_complete(id, ec)`;
/// `on_flush(gen)`, `on_up(gen)` and `on_down(gen)` do nothing unless it hides them.
/// `Request` is the driver's side of a request (its body, handler and reply), kept here by
/// the pipe's id.
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

protected:
    // The hooks a driver need not have: one request at a time sends each as it is written,
    // and nobody listens for up and down.
    void on_flush(std::uint64_t) {}
    void on_up(std::uint64_t) {}
    void on_down(std::uint64_t) {}
    /// The requests kept, by id.
    std::unordered_map<std::uint64_t, Request>& requests() noexcept { return requests_; }

    std::minstd_rand rng_;
    request_pipe pipe;

private:
    void handle(const pipe_action& a)
    {
        using type = pipe_action::type;
        auto& d = *static_cast<Driver*>(this);
        switch (a.t) {
        case type::connect: return d.on_connect(a.gen);
        case type::write: return d.on_write(a.gen, a.id);
        case type::flush: return d.on_flush(a.gen);
        case type::reset: return d.on_reset(a.gen);
        case type::complete: return d.on_complete(a.id, a.ec);
        case type::up: return d.on_up(a.gen);
        case type::down: return d.on_down(a.gen);
        case type::cancel_timer: return void(timer_.cancel());
        case type::set_timer: return arm(a.at);
        }
    }

    void arm(request_pipe::time_point at)
    {
        timer_.expires_at(at);
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
