// SPDX-License-Identifier: BSL-1.0
#include "postgres/connection.hpp"

#include <dlock/error.hpp>

#include "common/sql_connection_host.hpp"
#include "common/stored_handler.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>
#include <sys/socket.h>

#include <optional>

namespace dlock::postgres::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using wait_type = asio::posix::descriptor_base::wait_type;
constexpr auto tuple = asio::as_tuple(asio::use_awaitable);
using dlock::detail::request_pipe;
using time_point = request_pipe::time_point;

namespace {

// libpq's words for a refused TLS handshake or certificate, first match wins, and what was
// refused. Not among them: a handshake cut short (`SSL SYSCALL error`, `unexpected eof`),
// which is the network's and may pass.
struct tls_refusal {
    std::string_view needle, what;
};
constexpr tls_refusal tls_refusals[] = {
    {"does not match host name", "the server's certificate is not issued for this host name (sslmode=verify-full)"},
    {"certificate verify failed",
     "the server's certificate did not verify: not signed by the CA in sslrootcert, or out of its dates"},
    {"alert certificate expired", "the server refused our client certificate (sslcert): it has expired"},
    {"alert unknown ca", "the server refused our client certificate (sslcert): signed by a CA it does not trust"},
    {"alert certificate required", "the server requires a client certificate (sslcert and sslkey)"},
    {"requires a valid client certificate", "the server requires a client certificate (sslcert and sslkey)"},
    {"alert bad certificate", "the server refused our client certificate (sslcert)"},
    {"alert certificate revoked", "the server refused our client certificate (sslcert): revoked"},
    {"alert certificate unknown", "the server refused our client certificate (sslcert)"},
    {" alert ", "the server ended the TLS handshake"},
    {"root certificate file", "the CA file (sslrootcert) cannot be used"},
    {"private key file", "the client key (sslkey) cannot be used (missing, not mode 0600, or not the certificate's)"},
    {"certificate file", "the client certificate (sslcert) cannot be used"},
    {"server does not support SSL", "the server does not offer TLS, and sslmode requires it"},
    {"wrong version number", "the server does not speak TLS on this port"},
};

// libpq's text on one line: messages may span several ("...\nEither provide the file ...").
std::string one_line(std::string_view text)
{
    std::string s;
    for (char c : text)
        s += c == '\n' ? ' ' : c;
    while (!s.empty() && s.back() == ' ')
        s.pop_back();
    return s;
}

}  // namespace

connect_failure classify_connect_failure(std::string_view libpq_text, const config& cfg)
{
    std::string said = one_line(libpq_text);
    for (const auto& r : tls_refusals)
        if (said.find(r.needle) != std::string::npos)
            return {error::tls_failed,
                    "postgresql " + to_url(cfg) + ": TLS refused: " + std::string(r.what) + " (libpq: " + said + ")"};
    return {sql::connect_error_of(said), "postgresql " + to_url(cfg) + ": " + said};
}

struct request {
    std::string text;
    std::vector<std::string> params;
    bool simple = false;
    dlock::detail::stored_handler<connection::exec_signature> h;
    sql::result res{};
    bool written = false;
};

struct connection_impl : dlock::detail::sql_connection_host<connection_impl, request, connection_settings>,
                         std::enable_shared_from_this<connection_impl> {
    PGconn* pg = nullptr;
    bool up = false;            // connected and set up
    std::uint64_t to_send = 0;  // the request the connection's coroutine sends next (0: none)
    bool idle_wait = false;     // the coroutine waits for input only: a request interrupts it

    connection_impl(asio::any_io_executor e, connection_settings st) : sql_connection_host(e, std::move(st)) {}
    ~connection_impl()
    {
        sock.release();  // never close libpq's fd
        if (pg)
            PQfinish(pg);
    }

    void drop()
    {
        sock.release();
        if (pg) {
            PQfinish(pg);
            pg = nullptr;
        }
        up = false;
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

    using waited = dlock::detail::socket_wait;

    // Waits until libpq's socket is ready for `w`, `deadline` passes or the wait is cancelled.
    static asio::awaitable<waited> wait_socket(std::shared_ptr<connection_impl> self, wait_type w,
                                               clock_type::time_point deadline)
    {
        return dlock::detail::wait_borrowed({self, &self->sock}, PQsocket(self->pg), w, deadline);
    }

    static error_code lost_or(PGconn* pg, error_code otherwise)
    {
        return PQstatus(pg) == CONNECTION_BAD ? error_code(error::connection_lost) : otherwise;
    }

    // What a socket wait means for the query waiting on it (empty: go on).
    std::optional<error_code> after_wait(waited w) const
    {
        if (closed)
            return error::closed;
        if (w == waited::timeout)
            return error::timeout;
        if (w != waited::ready)
            return error::connection_lost;
        return std::nullopt;
    }

    // Sends the query and flushes it; empty once it is all on the wire.
    static asio::awaitable<std::optional<error_code>> send_query(std::shared_ptr<connection_impl> self,
                                                                 const request& req, clock_type::time_point deadline,
                                                                 sql::result& res)
    {
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
            co_return lost_or(pg, error::server_error);
        }
        for (int f = PQflush(pg); f != 0; f = PQflush(pg)) {
            if (f < 0) {
                res.message = PQerrorMessage(pg);
                co_return error::connection_lost;
            }
            if (auto ec = self->after_wait(co_await wait_socket(self, wait_type::wait_write, deadline)))
                co_return ec;
        }
        co_return std::nullopt;
    }

    // One result of the query into `res`: the rows of the last set, or the first error.
    static void collect(PGresult* r, sql::result& res, bool& failed)
    {
        auto st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK && !failed) {
            res.rows.clear();
            int n = PQntuples(r), m = PQnfields(r);
            for (int i = 0; i < n; ++i) {
                sql::row row;
                for (int j = 0; j < m; ++j)
                    row.push_back(PQgetisnull(r, i, j) ? std::nullopt
                                                       : std::optional<std::string>(
                                                             std::string(PQgetvalue(r, i, j), PQgetlength(r, i, j))));
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
    }

    // One query on the connection (up or being set up), its results read to the end.
    static asio::awaitable<std::pair<error_code, sql::result>>
    query(std::shared_ptr<connection_impl> self, const request& req, clock_type::time_point deadline)
    {
        sql::result res;
        PGconn* pg = self->pg;
        if (auto ec = co_await send_query(self, req, deadline, res))
            co_return std::pair{*ec, std::move(res)};
        for (bool failed = false;;) {
            if (!PQconsumeInput(pg)) {
                res.message = PQerrorMessage(pg);
                co_return std::pair{error_code(error::connection_lost), std::move(res)};
            }
            self->deliver_notifies();
            while (!PQisBusy(pg)) {
                PGresult* r = PQgetResult(pg);
                if (!r) {  // the last one: done
                    auto ec = PQstatus(pg) == CONNECTION_BAD ? error_code(error::connection_lost) : sql::error_of(res);
                    co_return std::pair{ec, std::move(res)};
                }
                collect(r, res, failed);
                PQclear(r);
            }
            if (auto ec = self->after_wait(co_await wait_socket(self, wait_type::wait_read, deadline)))
                co_return std::pair{*ec, std::move(res)};
        }
    }

    // libpq's connect, started with the address resolved here (null: out of memory).
    static PGconn* start(const config& cfg, const std::string& hostaddr)
    {
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
        const std::string sslmode = effective_sslmode(cfg);
        add("sslmode", sslmode);
        add("sslrootcert", cfg.sslrootcert);
        add("sslcert", cfg.sslcert);
        add("sslkey", cfg.sslkey);
        add("application_name", app);
        add("client_encoding", utf8);
        add("gssencmode", disable);  // GSSAPI negotiation may block
        keys.push_back(nullptr);
        values.push_back(nullptr);
        return PQconnectStartParams(keys.data(), values.data(), 0);
    }

    // Connects, authenticates and runs the setup.
    static asio::awaitable<error_code> connect(std::shared_ptr<connection_impl> self)
    {
        const auto& cfg = self->s.cfg;
        auto deadline = self->deadline_after(cfg.connect_timeout);
        std::string hostaddr;
        if (auto rec = co_await resolve(self, !cfg.host.empty() && cfg.host.front() != '/', hostaddr))
            co_return rec;
        self->pg = start(cfg, hostaddr);
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
        auto refused = [&] {
            auto [ec, text] = classify_connect_failure(PQerrorMessage(self->pg), cfg);
            return fail(ec, std::move(text));
        };
        if (PQstatus(self->pg) == CONNECTION_BAD)
            co_return refused();
        auto poll = PGRES_POLLING_WRITING;
        while (poll != PGRES_POLLING_OK) {
            if (poll == PGRES_POLLING_FAILED)
                co_return refused();
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
        auto [sec, why] = co_await set_up(self, deadline);
        co_return sec&& sec != error::closed ? fail(sec, std::move(why)) : sec;
    }

    static asio::awaitable<std::pair<error_code, sql::result>> setup_query(std::shared_ptr<connection_impl> self,
                                                                           clock_type::time_point deadline)
    {
        request setup{self->s.setup, {}, true, {}, {}, false};
        co_return co_await query(self, setup, deadline);
    }

    void on_connect(std::uint64_t gen) { asio::co_spawn(ex, run(shared_from_this(), gen), asio::detached); }

    void on_up(std::uint64_t)
    {
        up = true;
        if (s.on_up)
            s.on_up();
    }

    void on_down(std::uint64_t)
    {
        if (s.on_down)
            s.on_down();
    }

    void on_write(std::uint64_t, std::uint64_t id)
    {
        find_request(id)->written = true;
        to_send = id;
        if (idle_wait && sock.sd.is_open())
            sock.sd.cancel();  // the coroutine is waiting for notifications: it sends now
    }

    // The coroutine owns the connection while it runs: its socket is shut so that what it
    // waits on fails at once, and it drops the connection on the way out.
    void on_reset(std::uint64_t gen)
    {
        up = false;
        if (running) {
            resetting = true;
            if (pg && PQsocket(pg) >= 0)
                ::shutdown(PQsocket(pg), SHUT_RDWR);
            if (sock.sd.is_open())
                sock.sd.cancel();
            return;
        }
        drop();
        pipe.on_reset_done(gen, clock_type::now());
    }

    // Sends the request the pipe wrote and reports its outcome.
    static asio::awaitable<void> send(std::shared_ptr<connection_impl> self, std::uint64_t gen)
    {
        auto id = std::exchange(self->to_send, 0);
        // Closed (or the request ended) between the write's decision and this first step: nothing to send.
        const auto* found = self->closed ? nullptr : self->find_request(id);
        if (!found)
            co_return;
        const auto& r = *found;
        request req{r.text, r.params, r.simple, {}, {}, true};  // a copy: the pipe may end the request first
        auto [ec, res] = co_await query(self, req, clock_type::time_point::max());
        if (self->closed || self->resetting)
            co_return;  // the pipe answered it (closed, timeout, connection_lost)
        if (auto* r = self->find_request(id))
            r->res = std::move(res);
        bool keep = ec != error::connection_lost && ec != error::timeout && PQstatus(self->pg) != CONNECTION_BAD;
        self->input([&](request_pipe& p, time_point now) { p.on_reply(gen, id, ec, keep, now); });
    }

    // Idle: reads notifications, and notices a connection the server closed.
    static asio::awaitable<void> idle(std::shared_ptr<connection_impl> self, std::uint64_t gen)
    {
        self->idle_wait = true;
        auto w = co_await wait_socket(self, wait_type::wait_read, clock_type::time_point::max());
        self->idle_wait = false;
        if (self->closed || self->resetting || w == waited::cancelled)
            co_return;
        if (w == waited::ready && PQconsumeInput(self->pg) && PQstatus(self->pg) != CONNECTION_BAD)
            co_return self->deliver_notifies();
        self->input([&](request_pipe& p, time_point now) { p.on_dropped(gen, error::connection_lost, now); });
    }

    // One connection's life: connect and set up, then send what the pipe writes and read
    // notifications in between, until the pipe resets it or close() ends it.
    static asio::awaitable<void> run(std::shared_ptr<connection_impl> self, std::uint64_t gen)
    {
        self->running = true;
        auto ec = co_await connect(self);
        if (!self->closed && !self->resetting) {
            self->connected(gen, ec);
            while (!ec && !self->closed && !self->resetting) {
                if (self->to_send)
                    co_await send(self, gen);
                else
                    co_await idle(self, gen);
            }
        }
        self->running = false;
        if (self->closed)
            co_return;
        self->drop();
        if (std::exchange(self->resetting, false))
            self->input([&](request_pipe& p, time_point now) { p.on_reset_done(gen, now); });
    }
};

connection::connection(asio::any_io_executor ex, connection_settings s)
    : sql_connection_face(std::make_shared<connection_impl>(ex, std::move(s)))
{
}

connection::~connection()
{
    close();
}

void connection::exec(std::string text, std::vector<std::string> params, asio::any_completion_handler<exec_signature> h)
{
    auto& i = *impl_;
    auto id = i.add_request(request{std::move(text), std::move(params), false, std::move(h), {}, false});
    i.input([&](request_pipe& p, time_point now) { p.on_request(id, std::chrono::milliseconds(0), now); });
}

void connection::start()
{
    impl_->input([](request_pipe& p, time_point now) { p.on_start(now); });
}

int connection::backend_pid() const noexcept
{
    return impl_->up && impl_->pg ? PQbackendPID(impl_->pg) : 0;
}

const std::string& connection::last_connect_error() const noexcept
{
    return impl_->connect_error;
}

void connection::close()
{
    auto& i = *impl_;
    i.s.on_up = nullptr;  // nothing is told after close()
    i.s.on_down = nullptr;
    i.s.on_notify = nullptr;
    i.close([&] { i.drop(); });
}

}  // namespace dlock::postgres::detail
