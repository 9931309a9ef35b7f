// SPDX-License-Identifier: BSL-1.0
#include "redis/tx_runner.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>

#include "common/post_completion.hpp"
#include "redis/reply_errors.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <deque>
#include <utility>

namespace dlock::redis::tx {

namespace asio = boost::asio;
using boost::system::error_code;
using dlock::detail::post_completion;

struct runner::state : std::enable_shared_from_this<state> {
    state(asio::any_io_executor e, config cfg, runner_options o, std::function<void(std::string)> k)
        : ex(e), conn(e, std::move(cfg)), opts(o), keep(std::move(k))
    {
    }
    using job = std::function<asio::awaitable<void>(std::shared_ptr<state>)>;

    asio::any_io_executor ex;
    connection conn;
    runner_options opts;
    std::function<void(std::string)> keep;
    std::deque<job> jobs;
    bool running = false;
    std::uint64_t conflicts = 0;

    // One transaction at a time: the next one's UNWATCH/WATCH must not land between
    // another's reads and its EXEC.
    void submit(job j)
    {
        jobs.push_back(std::move(j));
        if (running)
            return;
        running = true;
        asio::co_spawn(ex, drain(shared_from_this()), asio::detached);
    }

    static asio::awaitable<void> drain(std::shared_ptr<state> self)
    {
        while (!self->jobs.empty()) {
            auto j = std::move(self->jobs.front());
            self->jobs.pop_front();
            co_await j(self);
        }
        self->running = false;  // nothing waits while idle, so io_context::run can return
    }

    // A failed request: a server error reply becomes its code (text kept), others pass.
    error_code failure(error_code ec, const response& r)
    {
        auto text = first_error(r);
        if (text.empty())
            return ec == error::server_error ? error_code(error::invalid_request) : ec;
        keep(text);
        return dlock::detail::error_from_reply(text);
    }

    // Reads, decides, writes; again on a conflict, up to max_conflicts times.
    template <class Result, class Plan, class Finish>
    asio::awaitable<std::pair<error_code, Result>> transact(request read, Plan plan, Finish finish)
    {
        for (int i = 0; i < opts.max_conflicts; ++i) {
            if (!conn.is_connected()) {
                auto [ec] = co_await conn.async_connect(asio::as_tuple(asio::use_awaitable));
                if (ec) {
                    if (!conn.last_server_message().empty())
                        keep(conn.last_server_message());
                    co_return std::pair{ec, Result{}};
                }
            }
            // Both requests on this one connection: if it drops in between, the write is
            // refused rather than sent unwatched on the next one.
            const auto gen = conn.generation();
            auto [ec, reads] = co_await conn.async_exec_pinned(read, gen, asio::as_tuple(asio::use_awaitable));
            if (ec)
                co_return std::pair{failure(ec, reads), Result{}};
            auto p = plan(reads);
            if (p.ec && !p.why.empty())
                keep(std::move(p.why));
            if (p.ec || p.done)
                co_return std::pair{p.ec, p.ec ? Result{} : p.result};
            auto [wec, written] = co_await conn.async_exec_pinned(p.write, gen, asio::as_tuple(asio::use_awaitable));
            if (!wec && !first_error(written).empty())
                wec = error::server_error;  // a command failed inside EXEC
            if (wec)
                co_return std::pair{failure(wec, written), Result{}};
            Result out{};
            error_code fec;
            switch (finish(written, p, out, fec)) {
            case outcome::committed: co_return std::pair{error_code(), out};
            case outcome::failed: co_return std::pair{fec, Result{}};
            case outcome::conflict: ++conflicts; break;
            }
        }
        keep("dlock: " + std::to_string(opts.max_conflicts) +
             " WATCH conflicts in a row (other clients keep changing the lock's keys)");
        co_return std::pair{error_code(error::server_busy), Result{}};
    }

    // A single request (no WATCH): force release, status.
    asio::awaitable<std::pair<error_code, response>> once(request req)
    {
        auto [ec, r] = co_await conn.async_exec(req, asio::as_tuple(asio::use_awaitable));
        if (!ec && !first_error(r).empty())
            ec = error::server_error;
        if (ec)
            ec = failure(ec, r);
        co_return std::pair{ec, std::move(r)};
    }
};

namespace {

template <class Sig>
auto shared(asio::any_completion_handler<Sig> h)
{
    return std::make_shared<asio::any_completion_handler<Sig>>(std::move(h));
}

}  // namespace

runner::runner(asio::any_io_executor ex, config cfg, runner_options opts, std::function<void(std::string)> keep)
    : state_(std::make_shared<state>(ex, std::move(cfg), opts, std::move(keep)))
{
}

runner::~runner()
{
    close();
}

void runner::close()
{
    state_->conn.close();
}

std::uint64_t runner::conflicts() const noexcept
{
    return state_->conflicts;
}

void runner::acquire(names k, std::string token, std::chrono::milliseconds ttl,
                     asio::any_completion_handler<store::acquire_signature> h)
{
    state_->submit([k = std::move(k), token = std::move(token), ttl,
                    h = shared(std::move(h))](std::shared_ptr<state> s) -> asio::awaitable<void> {
        auto read = read_acquire(k);
        auto [ec, out] = co_await s->transact<acquire_result>(
            read, [&](const response& r) { return plan_acquire(r, k, token, ttl); },
            [](const response& w, const plan<acquire_result>& p, acquire_result& o, error_code& e) {
                return finish_acquire(w, p, o, e);
            });
        if (!ec && out.acquired && s->opts.wait_replicas > 0) {
            // WAIT counts this connection's writes: the transaction's, if it is still up.
            request wait;
            wait.push("WAIT", s->opts.wait_replicas, std::max<long long>(s->opts.wait_timeout.count(), 1));
            auto [wec, r] =
                co_await s->conn.async_exec_pinned(wait, s->conn.generation(), asio::as_tuple(asio::use_awaitable));
            long long acked = 0;
            if (!wec && !(r.size() == 1 && r[0].type == reply_type::integer))
                wec = error::invalid_request;
            if (!wec && (acked = r[0].integer) < s->opts.wait_replicas)
                wec = error::not_replicated;
            if (wec) {  // not replicated, or unknown: give the lease back
                co_await s->transact<bool>(
                    read_owner(k), [&](const response& rr) { return plan_release(rr, k, token); },
                    [](const response& w, const plan<bool>&, bool& o, error_code& e) {
                        return finish_release(w, o, e);
                    });
                ec = wec == error::server_error ? s->failure(wec, r) : wec;
                out = acquire_result{};
            }
        }
        post_completion(s->ex, std::move(*h), ec, out);
    });
}

void runner::renew(names k, std::string token, std::chrono::milliseconds ttl,
                   asio::any_completion_handler<store::renew_signature> h)
{
    state_->submit([k = std::move(k), token = std::move(token), ttl,
                    h = shared(std::move(h))](std::shared_ptr<state> s) -> asio::awaitable<void> {
        auto [ec, out] = co_await s->transact<renew_result>(
            read_owner(k), [&](const response& r) { return plan_renew(r, k, token, ttl); },
            [](const response& w, const plan<renew_result>&, renew_result& o, error_code& e) {
                return finish_renew(w, o, e);
            });
        post_completion(s->ex, std::move(*h), ec, out);
    });
}

void runner::release(names k, std::string token, asio::any_completion_handler<store::bool_signature> h)
{
    state_->submit([k = std::move(k), token = std::move(token),
                    h = shared(std::move(h))](std::shared_ptr<state> s) -> asio::awaitable<void> {
        auto [ec, out] = co_await s->transact<bool>(
            read_owner(k), [&](const response& r) { return plan_release(r, k, token); },
            [](const response& w, const plan<bool>&, bool& o, error_code& e) { return finish_release(w, o, e); });
        post_completion(s->ex, std::move(*h), ec, out);
    });
}

void runner::force_release(names k, asio::any_completion_handler<store::bool_signature> h)
{
    state_->submit([k = std::move(k), h = shared(std::move(h))](std::shared_ptr<state> s) -> asio::awaitable<void> {
        auto [ec, r] = co_await s->once(tx::force_release(k));
        bool out = false;
        if (!ec)
            ec = decode_force_release(r, out);
        post_completion(s->ex, std::move(*h), ec, out);
    });
}

void runner::status(names k, asio::any_completion_handler<store::status_signature> h)
{
    state_->submit([k = std::move(k), h = shared(std::move(h))](std::shared_ptr<state> s) -> asio::awaitable<void> {
        auto [ec, r] = co_await s->once(tx::status(k));
        lock_status out;
        if (!ec)
            ec = decode_status(r, out);
        if (ec)
            out = lock_status{};
        out.key = k.lock;
        post_completion(s->ex, std::move(*h), ec, out);
    });
}

}  // namespace dlock::redis::tx
