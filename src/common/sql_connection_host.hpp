// SPDX-License-Identifier: BSL-1.0
// What the two SQL connection drivers (MariaDB's, PostgreSQL's) keep and do alike on the
// request pipe's host: their settings, the client library's socket borrowed for a wait, the
// text of the last failed connect, the setup query after a connect, a request's completion.
// Each keeps only its client library's calls.
//
// Both connections' exec() completes with the reply or an error: connect_failed,
// resolve_failed, auth_failed, handshake_failed (a missing database), permission_denied,
// server_busy, connection_lost (it dropped with the query on the wire: it may have run),
// timeout (the connection is reset), the query's own (sql::error_of), closed. Completions are
// posted, never run inside exec(); requests run in the order queued. Not thread-safe: one
// executor.
#pragma once

#include <dlock/error.hpp>

#include "common/borrowed_socket.hpp"
#include "common/library_address.hpp"
#include "common/pipe_host.hpp"
#include "common/sql_reply.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace dlock::detail {

/// `Settings` has `cfg.request_timeout`, `setup` (a query after each connect; empty: none),
/// `refused` (a config the store refused: every request fails with its text) and may have
/// `persistent` (keep connected, not on demand). `Driver` has
/// `static awaitable<pair<error_code, Result>> setup_query(shared_ptr<Driver>, time_point)`,
/// where Result has `message`, besides pipe_host's hooks.
template <class Driver, class Request, class Settings>
class sql_connection_host : public pipe_host<Driver, Request> {
public:
    using error_code = boost::system::error_code;
    using clock_type = std::chrono::steady_clock;

    sql_connection_host(const boost::asio::any_io_executor& e, Settings st)
        : pipe_host<Driver, Request>(e,
                                     one_query_at_a_time(st.cfg.request_timeout, !st.refused.empty(), persistent(st))),
          ex(e), s(std::move(st)), sock(e)
    {
    }

    boost::asio::any_io_executor ex;
    Settings s;
    bool running = false;    // a coroutine drives the library's connection
    bool resetting = false;  // the pipe ended the connection: the coroutine finishes it on its way out
    bool closed = false;
    borrowed_socket sock;       // the library's, for one wait at a time
    std::string connect_error;  // the library's text of the last failed connect

    clock_type::time_point deadline_after(std::chrono::milliseconds d) const
    {
        return d.count() > 0 ? clock_type::now() + d : clock_type::time_point::max();
    }

    /// The pipe ends request `id`: its handler gets the reply, posted.
    void on_complete(std::uint64_t id, error_code ec) { complete_request(ex, this->take_request(id), ec, s.refused); }

    /// The connect of generation `gen` ended (`ec`: how it failed): the requests waiting for
    /// it, not yet written, fail with the library's text as their reply's message.
    void connected(std::uint64_t gen, error_code ec)
    {
        if (ec) {
            for (auto& [id, r] : this->requests())
                if (!r.written)
                    r.res.message = connect_error;
        } else {
            connect_error.clear();
        }
        this->connect_ended(gen, ec);
    }

    /// The connection's close(), once: requests fail with closed, a coroutine's wait ends,
    /// then `finish_handle()` ends the library's handle.
    template <class Finish>
    void close(Finish finish_handle)
    {
        if (closed)
            return;
        closed = true;
        this->input([](request_pipe& p, request_pipe::time_point) { p.on_close(); });
        sock.release();  // cancels a coroutine's wait; the fd is the library's to close
        sock.timer.cancel();
        finish_handle();
    }

    /// Over TCP, cfg.host's address for the client library, resolved here (the library would
    /// block on it): resolve_failed with the reason kept, or closed if close() came meanwhile.
    static boost::asio::awaitable<error_code> resolve(std::shared_ptr<Driver> self, bool tcp, std::string& address)
    {
        if (!tcp)
            co_return error_code();
        const auto& cfg = self->s.cfg;
        auto ec = co_await library_address(self->ex, cfg.host, cfg.port, address, self->connect_error);
        co_return self->closed ? error_code(error::closed) : ec;
    }

    /// The setup query after a connect: its failure is the connect's, with the server's text
    /// (a timeout: connect_failed, as the handshake's); closed if close() came meanwhile.
    static boost::asio::awaitable<std::pair<error_code, std::string>> set_up(std::shared_ptr<Driver> self,
                                                                             clock_type::time_point deadline)
    {
        if (self->s.setup.empty())
            co_return std::pair{error_code(), std::string()};
        auto [ec, res] = co_await Driver::setup_query(self, deadline);
        if (self->closed)
            co_return std::pair{error_code(error::closed), std::string()};
        if (ec == error::timeout)
            ec = error::connect_failed;
        co_return std::pair{ec, std::move(res.message)};
    }

private:
    // Settings that say `persistent` keep connected by themselves (PostgreSQL's listener).
    static bool persistent(const Settings& st)
    {
        if constexpr (requires { st.persistent; })
            return st.persistent;
        return false;
    }
};

}  // namespace dlock::detail
