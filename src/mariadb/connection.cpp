// SPDX-License-Identifier: BSL-1.0
#include "mariadb/connection.hpp"

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

#include <mysql.h>
#include <poll.h>
#include <sys/socket.h>

#include <functional>
#include <mutex>

namespace dlock::mariadb::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using wait_type = asio::posix::descriptor_base::wait_type;
using dlock::detail::request_pipe;
using time_point = request_pipe::time_point;
constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

namespace {

// mysql_library_init is not thread-safe: once per process, before the first mysql_init.
void library_init()
{
    static std::once_flag once;
    std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

}  // namespace

struct request {
    std::string text;
    dlock::detail::stored_handler<connection::exec_signature> h;
    sql::result res;
    bool written = false;
};

struct connection_impl : dlock::detail::sql_connection_host<connection_impl, request, connection_settings>,
                         std::enable_shared_from_this<connection_impl> {
    MYSQL* m = nullptr;
    bool timed_out = false;  // the connect passed its deadline: its socket was shut
    // The operation in flight inside the library: its _cont, and where it writes its result
    // (members, not coroutine locals, so that close() can run it to its end at any time).
    std::function<int(int)> pending;
    int op_int = 0;
    MYSQL* op_conn = nullptr;
    MYSQL_RES* op_res = nullptr;

    connection_impl(asio::any_io_executor e, connection_settings st) : sql_connection_host(e, std::move(st)) {}
    ~connection_impl() { finish_handle(); }

    void shut_socket()
    {
        if (m) {
            int fd = static_cast<int>(mysql_get_socket(m));
            if (fd >= 0)
                ::shutdown(fd, SHUT_RDWR);
        }
    }

    // Ends the handle without blocking: the socket is shut first, so an operation left in
    // the library fails at once when run to its end, and mysql_close's COM_QUIT goes nowhere.
    void finish_handle()
    {
        sock.release();  // never close the library's fd; cancels a wait
        if (!m)
            return;
        shut_socket();
        if (pending) {
            int st = pending(MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_TIMEOUT);
            for (int i = 0; st != 0 && i < 1000; ++i)
                st = pending(MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_TIMEOUT);
            pending = nullptr;
        }
        if (op_res) {
            mysql_free_result(op_res);
            op_res = nullptr;
        }
        mysql_close(m);
        m = nullptr;
    }

    // An idle connection the server has closed (KILL, restart, wait_timeout) has something to
    // read: an error packet or EOF. Checked without blocking before each request.
    bool idle_dead() const
    {
        pollfd p{static_cast<int>(mysql_get_socket(m)), POLLIN, 0};
        return p.fd < 0 || ::poll(&p, 1, 0) != 0;
    }

    // Waits for what the library asked for in `status`; returns the bits to pass to _cont.
    static asio::awaitable<int> wait_for(std::shared_ptr<connection_impl> self, int status,
                                         clock_type::time_point deadline)
    {
        int want = status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_EXCEPT);
        if (self->timed_out || self->resetting)  // the socket is shut: the library fails as soon as it looks
            co_return want ? want : MYSQL_WAIT_TIMEOUT;
        auto until = deadline;
        bool library_timer = false;
        if (status & MYSQL_WAIT_TIMEOUT) {
            auto t = clock_type::now() + std::chrono::milliseconds(mysql_get_timeout_value_ms(self->m));
            if (t < until) {
                until = t;
                library_timer = true;
            }
        }
        auto deadline_passed = [&] {
            self->timed_out = true;
            self->shut_socket();
            return want ? want : MYSQL_WAIT_TIMEOUT;
        };
        if (!want) {
            self->sock.timer.expires_at(until);
            co_await self->sock.timer.async_wait(tuple);
            if (self->closed)
                co_return 0;
            co_return library_timer ? MYSQL_WAIT_TIMEOUT : deadline_passed();
        }
        // Readiness or cancellation (the deadline, abort): either way _cont looks at the socket
        // (also when the fd cannot be waited on: the library finds out what is wrong with it).
        auto w = co_await dlock::detail::wait_borrowed(
            {self, &self->sock}, static_cast<int>(mysql_get_socket(self->m)),
            want & MYSQL_WAIT_WRITE ? wait_type::wait_write : wait_type::wait_read, until);
        if (self->closed)
            co_return 0;
        if (w == dlock::detail::socket_wait::timeout)
            co_return library_timer ? MYSQL_WAIT_TIMEOUT : deadline_passed();
        co_return want;
    }

    // Runs the library's operation (its _start returned `status`, its _cont is `pending`) to
    // its end; false if close() ended it meanwhile.
    static asio::awaitable<bool> drive(std::shared_ptr<connection_impl> self, int status,
                                       clock_type::time_point deadline)
    {
        while (status != 0) {
            int ready = co_await wait_for(self, status, deadline);
            if (self->closed)
                co_return false;
            status = self->pending(ready);
        }
        self->pending = nullptr;
        co_return true;
    }

    error_code error_now(sql::result& res) const
    {
        res.errnum = mysql_errno(m);
        res.sqlstate = mysql_sqlstate(m);
        res.message = mysql_error(m);
        if (timed_out)
            return error::timeout;
        auto ec = sql::error_of(res.errnum);
        return ec ? ec : error_code(error::server_error);
    }

    // One multi-statement query; every result set is read.
    static asio::awaitable<std::pair<error_code, sql::result>>
    query(std::shared_ptr<connection_impl> self, const std::string& text, clock_type::time_point deadline)
    {
        sql::result res;
        connection_impl* i = self.get();
        i->timed_out = false;
        i->pending = [i](int ready) { return mysql_real_query_cont(&i->op_int, i->m, ready); };
        int st = mysql_real_query_start(&i->op_int, i->m, text.data(), text.size());
        if (!co_await drive(self, st, deadline))
            co_return std::pair{error_code(error::closed), std::move(res)};
        for (int rc = i->op_int;;) {
            if (rc != 0)
                co_return std::pair{i->error_now(res), std::move(res)};
            if (mysql_field_count(i->m) > 0) {
                i->op_res = nullptr;
                i->pending = [i](int ready) { return mysql_store_result_cont(&i->op_res, i->m, ready); };
                st = mysql_store_result_start(&i->op_res, i->m);
                if (!co_await drive(self, st, deadline))
                    co_return std::pair{error_code(error::closed), std::move(res)};
                MYSQL_RES* r = std::exchange(i->op_res, nullptr);
                if (!r)
                    co_return std::pair{i->error_now(res), std::move(res)};
                // A stored result is in memory: fetching and freeing it does no I/O.
                std::vector<sql::row> rows;
                unsigned n = mysql_num_fields(r);
                while (MYSQL_ROW row = mysql_fetch_row(r)) {
                    unsigned long* len = mysql_fetch_lengths(r);
                    sql::row out;
                    for (unsigned j = 0; j < n; ++j)
                        out.push_back(row[j] ? std::optional<std::string>(std::string(row[j], len[j])) : std::nullopt);
                    rows.push_back(std::move(out));
                }
                mysql_free_result(r);
                res.sets.push_back(std::move(rows));
            }
            if (!mysql_more_results(i->m))
                break;
            i->pending = [i](int ready) { return mysql_next_result_cont(&i->op_int, i->m, ready); };
            st = mysql_next_result_start(&i->op_int, i->m);
            if (!co_await drive(self, st, deadline))
                co_return std::pair{error_code(error::closed), std::move(res)};
            rc = i->op_int;
            if (rc == -1)
                break;
        }
        co_return std::pair{error_code(), std::move(res)};
    }

    // A handle set up for the non-blocking API, UTF-8 and no LOCAL INFILE (null: out of memory).
    static MYSQL* new_handle(bool unix_socket)
    {
        library_init();
        MYSQL* m = mysql_init(nullptr);
        if (!m)
            return nullptr;
        mysql_options(m, MYSQL_OPT_NONBLOCK, nullptr);
        unsigned protocol = unix_socket ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
        mysql_options(m, MYSQL_OPT_PROTOCOL, &protocol);
        mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
        unsigned no_infile = 0;
        mysql_options(m, MYSQL_OPT_LOCAL_INFILE, &no_infile);
        return m;
    }

    // Connects, authenticates and runs the setup.
    static asio::awaitable<error_code> connect(std::shared_ptr<connection_impl> self)
    {
        const auto& cfg = self->s.cfg;
        auto deadline = self->deadline_after(cfg.connect_timeout);
        const bool unix_socket = !cfg.host.empty() && cfg.host.front() == '/';
        std::string address;
        if (auto rec = co_await resolve(self, !unix_socket, address))
            co_return rec;
        connection_impl* i = self.get();
        i->timed_out = false;
        i->m = new_handle(unix_socket);
        if (!i->m) {
            i->connect_error = "MariaDB client: out of memory";
            co_return error::connect_failed;
        }
        auto fail = [&](error_code ec, std::string text) {
            i->connect_error = std::move(text);
            i->finish_handle();
            return ec;
        };
        i->op_conn = nullptr;
        i->pending = [i](int ready) { return mysql_real_connect_cont(&i->op_conn, i->m, ready); };
        int st = mysql_real_connect_start(&i->op_conn, i->m, unix_socket ? nullptr : address.c_str(),
                                          cfg.user.empty() ? nullptr : cfg.user.c_str(), cfg.password.c_str(),
                                          cfg.database.c_str(), unix_socket ? 0 : cfg.port,
                                          unix_socket ? cfg.host.c_str() : nullptr, CLIENT_MULTI_STATEMENTS);
        if (!co_await drive(self, st, deadline))
            co_return error::closed;
        if (!i->op_conn) {
            if (i->timed_out)
                co_return fail(error::connect_failed, "connect to " + to_url(cfg) + " timed out");
            unsigned e = mysql_errno(i->m);
            std::string text = mysql_error(i->m);
            auto ec = sql::error_of(e);
            // A connection that drops during the handshake failed to connect (transient).
            if (!ec || ec == error::connection_lost || ec == error::server_error)
                ec = error::connect_failed;
            co_return fail(ec, text);
        }
        auto [sec, why] = co_await set_up(self, deadline);
        co_return sec&& sec != error::closed ? fail(sec, std::move(why)) : sec;
    }

    static asio::awaitable<std::pair<error_code, sql::result>> setup_query(std::shared_ptr<connection_impl> self,
                                                                           clock_type::time_point deadline)
    {
        co_return co_await query(self, self->s.setup, deadline);
    }

    void on_connect(std::uint64_t gen) { asio::co_spawn(ex, connect_run(shared_from_this(), gen), asio::detached); }

    void on_write(std::uint64_t gen, std::uint64_t id)
    {
        if (idle_dead())  // it never left: the next connection runs it
            return pipe.on_not_sent(gen, clock_type::now());
        find_request(id)->written = true;
        asio::co_spawn(ex, query_run(shared_from_this(), gen, id), asio::detached);
    }

    // A call in the library is never cut short (its coroutine will resume it): its socket is
    // shut so that it fails at once, and the coroutine finishes the handle when it unwinds.
    void on_reset(std::uint64_t gen)
    {
        if (running) {
            resetting = true;
            shut_socket();
            sock.timer.cancel();
            return;
        }
        finish_handle();
        pipe.on_reset_done(gen, clock_type::now());
    }

    // The coroutine's end when the pipe reset its connection meanwhile; true if it did.
    bool unwound_reset(std::uint64_t gen)
    {
        if (!resetting)
            return false;
        resetting = false;
        finish_handle();
        input([&](request_pipe& p, time_point now) { p.on_reset_done(gen, now); });
        return true;
    }

    static asio::awaitable<void> connect_run(std::shared_ptr<connection_impl> self, std::uint64_t gen)
    {
        self->running = true;
        auto ec = co_await connect(self);
        self->running = false;
        if (self->closed || self->unwound_reset(gen))
            co_return;
        self->connected(gen, ec);
    }

    static asio::awaitable<void> query_run(std::shared_ptr<connection_impl> self, std::uint64_t gen, std::uint64_t id)
    {
        // Closed (or the request ended) between the write's decision and this first step: nothing to run.
        auto* req = self->closed ? nullptr : self->find_request(id);
        if (!req)
            co_return;
        self->running = true;
        auto text = req->text;  // the pipe may end the request before the query ends
        auto [ec, res] = co_await query(self, text, clock_type::time_point::max());
        self->running = false;
        if (self->closed || self->unwound_reset(gen))
            co_return;  // the pipe has answered it (closed, timeout, connection_lost)
        if (auto* r = self->find_request(id))
            r->res = std::move(res);
        bool keep = ec != error::connection_lost && ec != error::timeout;
        self->input([&](request_pipe& p, time_point now) { p.on_reply(gen, id, ec, keep, now); });
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

void connection::exec(std::string text, std::chrono::milliseconds timeout,
                      asio::any_completion_handler<exec_signature> h)
{
    auto& i = *impl_;
    auto id = i.add_request(request{std::move(text), std::move(h), {}, false});
    i.input([&](request_pipe& p, time_point now) { p.on_request(id, timeout, now); });
}

void connection::abort()
{
    impl_->input([](request_pipe& p, time_point now) { p.on_abort(now); });
}

const std::string& connection::last_connect_error() const noexcept
{
    return impl_->connect_error;
}

void connection::close()
{
    impl_->close([i = impl_.get()] { i->finish_handle(); });
}

}  // namespace dlock::mariadb::detail
