// SPDX-License-Identifier: BSL-1.0
#include "postgres/connection.hpp"

#include <dlock/error.hpp>

#include "common/borrowed_socket.hpp"
#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>

#include <algorithm>
#include <deque>

namespace dlock::postgres::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using wait_type = asio::posix::descriptor_base::wait_type;
constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

struct connection::impl : std::enable_shared_from_this<impl> {
    struct request {
        std::string text;
        std::vector<std::string> params;
        bool simple = false;
        dlock::detail::stored_handler<exec_signature> h;
    };

    asio::any_io_executor ex;
    connection_settings s;
    PGconn* pg = nullptr;
    bool up = false;  // connected and set up
    std::deque<request> queue;
    bool running = false;
    bool closed = false;
    bool started = false;
    bool idle_wait = false;               // the pump waits for input only: a request may interrupt it
    dlock::detail::borrowed_socket sock;  // libpq's, for one wait at a time
    asio::steady_timer backoff;           // persistent: between failed connects
    std::uint64_t connects = 0;
    std::string connect_error;

    impl(asio::any_io_executor e, connection_settings st) : ex(e), s(std::move(st)), sock(e), backoff(e) {}
    ~impl()
    {
        sock.release();  // never close libpq's fd
        if (pg)
            PQfinish(pg);
    }

    clock_type::time_point deadline_after(std::chrono::milliseconds d) const
    {
        return d.count() > 0 ? clock_type::now() + d : clock_type::time_point::max();
    }

    void drop()
    {
        sock.release();
        if (pg) {
            PQfinish(pg);
            pg = nullptr;
        }
        if (up) {
            up = false;
            if (s.on_down)
                s.on_down();
        }
    }

    void deliver_notifies()
    {
        while (PGnotify* n = PQnotifies(pg)) {
            std::string channel = n->relname ? n->relname : "", payload = n->extra ? n->extra : "";
            PQfreemem(n);
            if (s.on_notify)
                s.on_notify(channel, payload);
        }
    }

    void fail_all(error_code ec, const std::string& message = {})
    {
        while (!queue.empty()) {
            auto r = std::move(queue.front());
            queue.pop_front();
            sql::result res;
            res.message = message;
            dlock::detail::post_completion(ex, std::move(r.h), ec, std::move(res));
        }
    }

    void kick()
    {
        if (closed)
            return;
        if (idle_wait && sock.sd.is_open())
            sock.sd.cancel();
        if (!running) {
            running = true;
            asio::co_spawn(ex, run(shared_from_this()), asio::detached);
        }
    }

    using waited = dlock::detail::socket_wait;

    // Waits until libpq's socket is ready for `w`, `deadline` passes or the wait is cancelled.
    static asio::awaitable<waited> wait_socket(std::shared_ptr<impl> self, wait_type w, clock_type::time_point deadline)
    {
        return dlock::detail::wait_borrowed({self, &self->sock}, PQsocket(self->pg), w, deadline);
    }

    static error_code lost_or(PGconn* pg, error_code otherwise)
    {
        return PQstatus(pg) == CONNECTION_BAD ? error_code(error::connection_lost) : otherwise;
    }

    // One query on the connection (up or being set up); the connection is dropped on a
    // transport failure or a timeout.
    static asio::awaitable<std::pair<error_code, sql::result>> query(std::shared_ptr<impl> self, const request& req,
                                                                     clock_type::time_point deadline)
    {
        sql::result res;
        PGconn* pg = self->pg;
        int ok = 0;
        if (req.simple) {
            ok = PQsendQuery(pg, req.text.c_str());
        } else {
            std::vector<const char*> values;
            for (const auto& p : req.params)
                values.push_back(p.c_str());
            ok = PQsendQueryParams(pg, req.text.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                   nullptr, nullptr, 0);
        }
        if (!ok) {
            res.message = PQerrorMessage(pg);
            co_return std::pair{lost_or(pg, error::server_error), std::move(res)};
        }
        for (;;) {
            int f = PQflush(pg);
            if (f == 0)
                break;
            if (f < 0) {
                res.message = PQerrorMessage(pg);
                co_return std::pair{error_code(error::connection_lost), std::move(res)};
            }
            auto w = co_await wait_socket(self, wait_type::wait_write, deadline);
            if (self->closed)
                co_return std::pair{error_code(error::closed), std::move(res)};
            if (w == waited::timeout)
                co_return std::pair{error_code(error::timeout), std::move(res)};
            if (w != waited::ready)
                co_return std::pair{error_code(error::connection_lost), std::move(res)};
        }
        bool failed = false;
        for (;;) {
            if (!PQconsumeInput(pg)) {
                res.message = PQerrorMessage(pg);
                co_return std::pair{error_code(error::connection_lost), std::move(res)};
            }
            self->deliver_notifies();
            bool done = false;
            while (!PQisBusy(pg)) {
                PGresult* r = PQgetResult(pg);
                if (!r) {
                    done = true;
                    break;
                }
                auto st = PQresultStatus(r);
                if (st == PGRES_TUPLES_OK && !failed) {
                    res.rows.clear();
                    int n = PQntuples(r), m = PQnfields(r);
                    for (int i = 0; i < n; ++i) {
                        sql::row row;
                        for (int j = 0; j < m; ++j)
                            row.push_back(PQgetisnull(r, i, j) ? std::nullopt
                                                               : std::optional<std::string>(std::string(
                                                                     PQgetvalue(r, i, j), PQgetlength(r, i, j))));
                        res.rows.push_back(std::move(row));
                    }
                } else if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK && st != PGRES_EMPTY_QUERY && !failed) {
                    failed = true;
                    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                    res.sqlstate = state ? state : "";
                    res.message = PQresultErrorMessage(r);
                    if (res.message.empty())
                        res.message = "PostgreSQL: query failed";
                }
                PQclear(r);
            }
            if (done)
                break;
            auto w = co_await wait_socket(self, wait_type::wait_read, deadline);
            if (self->closed)
                co_return std::pair{error_code(error::closed), std::move(res)};
            if (w == waited::timeout)
                co_return std::pair{error_code(error::timeout), std::move(res)};
            if (w != waited::ready)
                co_return std::pair{error_code(error::connection_lost), std::move(res)};
        }
        auto ec = sql::error_of(res);
        if (PQstatus(pg) == CONNECTION_BAD)
            ec = error::connection_lost;
        co_return std::pair{ec, std::move(res)};
    }

    // Connects, authenticates and runs the setup.
    static asio::awaitable<error_code> connect(std::shared_ptr<impl> self)
    {
        const auto& cfg = self->s.cfg;
        auto deadline = self->deadline_after(cfg.connect_timeout);
        std::string hostaddr;
        if (!cfg.host.empty() && cfg.host.front() != '/') {
            // libpq would resolve the name with a blocking getaddrinfo(): resolve here instead.
            error_code aec;
            auto addr = asio::ip::make_address(cfg.host, aec);
            if (!aec) {
                hostaddr = addr.to_string();
            } else {
                asio::ip::tcp::resolver resolver(self->ex);
                auto [rec, eps] = co_await resolver.async_resolve(cfg.host, std::to_string(cfg.port), tuple);
                if (self->closed)
                    co_return error::closed;
                if (rec || eps.empty()) {
                    self->connect_error = "could not resolve " + cfg.host + ": " + rec.message();
                    co_return error::resolve_failed;
                }
                hostaddr = eps.begin()->endpoint().address().to_string();
            }
        }
        std::string port = std::to_string(cfg.port);
        std::vector<const char*> keys, values;
        auto add = [&](const char* k, const std::string& v) {
            if (!v.empty()) {
                keys.push_back(k);
                values.push_back(v.c_str());
            }
        };
        static const std::string app = "dlock", disable = "disable", utf8 = "UTF8";
        add("host", cfg.host);
        add("hostaddr", hostaddr);
        add("port", port);
        add("user", cfg.user);
        add("password", cfg.password);
        add("dbname", cfg.database);
        add("sslmode", cfg.sslmode);
        add("application_name", app);
        add("client_encoding", utf8);
        add("gssencmode", disable);  // GSSAPI negotiation may block
        keys.push_back(nullptr);
        values.push_back(nullptr);
        self->pg = PQconnectStartParams(keys.data(), values.data(), 0);
        if (!self->pg) {
            self->connect_error = "libpq: out of memory";
            co_return error::connect_failed;
        }
        // Notices (and a FATAL that arrives while idle) are not for stderr: errors come back as results.
        PQsetNoticeProcessor(
            self->pg, [](void*, const char*) {}, nullptr);
        auto fail = [&](error_code ec, std::string text) {
            self->connect_error = std::move(text);
            self->drop();
            return ec;
        };
        if (PQstatus(self->pg) == CONNECTION_BAD) {
            std::string text = PQerrorMessage(self->pg);
            co_return fail(sql::connect_error_of(text), text);
        }
        auto poll = PGRES_POLLING_WRITING;
        while (poll != PGRES_POLLING_OK) {
            if (poll == PGRES_POLLING_FAILED) {
                std::string text = PQerrorMessage(self->pg);
                co_return fail(sql::connect_error_of(text), text);
            }
            auto w = co_await wait_socket(
                self, poll == PGRES_POLLING_READING ? wait_type::wait_read : wait_type::wait_write, deadline);
            if (self->closed)
                co_return error::closed;
            if (w == waited::timeout)
                co_return fail(error::connect_failed, "connect to " + to_url(cfg) + " timed out");
            if (w != waited::ready)
                co_return fail(error::connect_failed, "connect to " + to_url(cfg) + ": no socket");
            poll = PQconnectPoll(self->pg);
        }
        if (PQsetnonblocking(self->pg, 1) != 0)
            co_return fail(error::connect_failed, PQerrorMessage(self->pg));
        if (!self->s.setup.empty()) {
            request setup{self->s.setup, {}, true, {}};
            auto [ec, res] = co_await query(self, setup, deadline);
            if (self->closed)
                co_return error::closed;
            if (ec)
                co_return fail(ec, res.message);
        }
        self->connect_error.clear();
        self->up = true;
        ++self->connects;
        if (self->s.on_up)
            self->s.on_up();
        co_return error_code();
    }

    static asio::awaitable<void> run(std::shared_ptr<impl> self)
    {
        auto pause = std::chrono::milliseconds(100);
        while (!self->closed) {
            if (!self->pg) {
                if (self->queue.empty() && !self->s.persistent)
                    break;
                auto ec = co_await connect(self);
                if (self->closed)
                    break;
                if (ec) {
                    if (!self->s.persistent) {
                        self->fail_all(ec, self->connect_error);
                        continue;
                    }
                    self->backoff.expires_after(pause);
                    co_await self->backoff.async_wait(tuple);
                    pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(2));
                    continue;
                }
                pause = std::chrono::milliseconds(100);
                continue;
            }
            if (!self->queue.empty()) {
                auto req = std::move(self->queue.front());
                self->queue.pop_front();
                auto [ec, res] = co_await query(self, req, self->deadline_after(self->s.cfg.request_timeout));
                if (self->closed) {
                    dlock::detail::post_completion(self->ex, std::move(req.h), error_code(error::closed),
                                                   sql::result{});
                    break;
                }
                if (ec == error::connection_lost || ec == error::timeout || !self->pg ||
                    PQstatus(self->pg) == CONNECTION_BAD)
                    self->drop();
                dlock::detail::post_completion(self->ex, std::move(req.h), ec, std::move(res));
                continue;
            }
            // Idle: read notifications, and notice a connection the server closed.
            self->idle_wait = true;
            auto w = co_await wait_socket(self, wait_type::wait_read, clock_type::time_point::max());
            self->idle_wait = false;
            if (self->closed)
                break;
            if (w == waited::ready) {
                if (!PQconsumeInput(self->pg) || PQstatus(self->pg) == CONNECTION_BAD)
                    self->drop();
                else
                    self->deliver_notifies();
            } else if (w == waited::failed) {
                self->drop();
            }
        }
        self->running = false;
        if (self->closed)
            self->fail_all(error::closed);
    }
};

connection::connection(asio::any_io_executor ex, connection_settings s)
    : impl_(std::make_shared<impl>(ex, std::move(s)))
{
}

connection::~connection()
{
    close();
}

void connection::exec(std::string text, std::vector<std::string> params, asio::any_completion_handler<exec_signature> h)
{
    if (impl_->closed)
        return dlock::detail::post_completion(impl_->ex, std::move(h), error_code(error::closed), sql::result{});
    if (!impl_->s.refused.empty()) {
        sql::result refused;
        refused.message = impl_->s.refused;
        return dlock::detail::post_completion(impl_->ex, std::move(h), error_code(error::invalid_option),
                                              std::move(refused));
    }
    impl_->queue.push_back(impl::request{std::move(text), std::move(params), false, std::move(h)});
    impl_->kick();
}

void connection::start()
{
    if (impl_->started || impl_->closed)
        return;
    impl_->started = true;
    impl_->kick();
}

bool connection::is_connected() const noexcept
{
    return impl_->up;
}

int connection::backend_pid() const noexcept
{
    return impl_->up && impl_->pg ? PQbackendPID(impl_->pg) : 0;
}

std::uint64_t connection::connects() const noexcept
{
    return impl_->connects;
}

const std::string& connection::last_connect_error() const noexcept
{
    return impl_->connect_error;
}

void connection::close()
{
    auto& i = *impl_;
    if (i.closed)
        return;
    i.closed = true;
    i.s.on_up = nullptr;
    i.s.on_down = nullptr;
    i.s.on_notify = nullptr;
    i.sock.release();  // cancels the pump's wait
    i.sock.timer.cancel();
    i.backoff.cancel();
    if (i.pg) {
        PQfinish(i.pg);
        i.pg = nullptr;
    }
    i.up = false;
    i.fail_all(error::closed);
}

}  // namespace dlock::postgres::detail
