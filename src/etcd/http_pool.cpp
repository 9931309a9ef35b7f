// SPDX-License-Identifier: BSL-1.0
#include "etcd/http_pool.hpp"

#include <dlock/error.hpp>

#include "common/post_completion.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <deque>
#include <vector>

namespace dlock::etcd::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

struct conn {
    explicit conn(asio::any_io_executor ex) : stream(ex) {}
    beast::tcp_stream stream;
    beast::flat_buffer buf;
    bool connected = false;
};

}  // namespace

struct http_pool::state {
    state(asio::any_io_executor e, const config& c) : ex(std::move(e)), cfg(c) {}
    asio::any_io_executor ex;
    config cfg;
    std::size_t current = 0;  // index of the member new connections go to
    std::vector<std::shared_ptr<conn>> idle;
    std::vector<std::weak_ptr<conn>> all;
    std::deque<std::shared_ptr<asio::steady_timer>> waiters;  // requests waiting for a connection
    std::size_t open = 0;
    bool closed = false;

    void wake_one()
    {
        while (!waiters.empty()) {
            auto t = std::move(waiters.front());
            waiters.pop_front();
            if (t->cancel() > 0)
                return;
        }
    }
    void discard(const std::shared_ptr<conn>& c)
    {
        error_code ignored;
        c->stream.socket().close(ignored);
        --open;
        wake_one();
    }
    void checkin(std::shared_ptr<conn> c)
    {
        if (closed) {
            error_code ignored;
            c->stream.socket().close(ignored);
            --open;
            return;
        }
        idle.push_back(std::move(c));
        wake_one();
    }
};

namespace {

using state_ptr = std::shared_ptr<http_pool::state>;

asio::awaitable<std::shared_ptr<conn>> checkout(state_ptr st, bool urgent)
{
    for (;;) {
        if (st->closed)
            co_return nullptr;
        if (!st->idle.empty()) {
            auto c = std::move(st->idle.back());
            st->idle.pop_back();
            co_return c;
        }
        if (st->open < std::max<std::size_t>(st->cfg.max_connections, 1)) {
            ++st->open;
            auto c = std::make_shared<conn>(st->ex);
            st->all.erase(std::remove_if(st->all.begin(), st->all.end(), [](auto& w) { return w.expired(); }),
                          st->all.end());
            st->all.push_back(c);
            co_return c;
        }
        auto t = std::make_shared<asio::steady_timer>(st->ex, asio::steady_timer::time_point::max());
        if (urgent)
            st->waiters.push_front(t);
        else
            st->waiters.push_back(t);
        error_code ec;
        co_await t->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
}

// Connects to the current member, or to the next ones in turn; the first that answers
// becomes current.
asio::awaitable<error_code> connect(state_ptr st, conn& c)
{
    tcp::resolver resolver(st->ex);
    auto n = st->cfg.endpoints.size();
    for (std::size_t i = 0; i < n; ++i) {
        auto idx = (st->current + i) % n;
        const auto& ep = st->cfg.endpoints[idx];
        error_code ec;
        auto results = co_await resolver.async_resolve(ep.host, std::to_string(ep.port),
                                                       asio::redirect_error(asio::use_awaitable, ec));
        if (st->closed)
            co_return error::closed;
        if (ec)
            continue;
        c.stream.expires_after(st->cfg.connect_timeout);
        co_await c.stream.async_connect(results, asio::redirect_error(asio::use_awaitable, ec));
        if (st->closed)
            co_return error::closed;
        if (!ec) {
            c.stream.socket().set_option(tcp::no_delay(true), ec);
            c.connected = true;
            st->current = idx;
            co_return error_code();
        }
        error_code ignored;
        c.stream.socket().close(ignored);
    }
    co_return error::connect_failed;
}

// A keep-alive connection the member closed while it sat idle fails at once on reuse,
// before any reply: such a failure says nothing about the request, which may go again.
bool stale_failure(const error_code& ec)
{
    return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
           ec == asio::error::broken_pipe;
}

// A POST of `body` to `target` on the current member, keeping the connection.
http::request<http::string_body> post_request(const http_pool::state& st, const std::string& target,
                                              const std::string& body)
{
    http::request<http::string_body> req{http::verb::post, target, 11};
    const auto& ep = st.cfg.endpoints[st.current];
    req.set(http::field::host, ep.host + ":" + std::to_string(ep.port));
    req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    return req;
}

void drop_idle(http_pool::state& st)
{
    for (auto& i : st.idle) {
        error_code ignored;
        i->stream.socket().close(ignored);
        --st.open;
    }
    st.idle.clear();
}

asio::awaitable<void> run(state_ptr st, std::string target, std::string body, std::chrono::milliseconds timeout,
                          bool urgent, bool idempotent, http_pool::handler h)
{
    error_code ec;
    http_reply rep;
    for (int attempt = 0;; ++attempt) {
        auto c = co_await checkout(st, urgent);
        if (!c) {
            dlock::detail::post_completion(st->ex, std::move(h), error_code(error::closed), std::move(rep));
            co_return;
        }
        bool reused = c->connected;
        ec = {};
        if (!c->connected)
            ec = co_await connect(st, *c);
        if (ec) {
            st->discard(c);
            break;
        }
        auto req = post_request(*st, target, body);
        c->stream.expires_after(timeout.count() > 0 ? timeout : st->cfg.request_timeout);
        co_await http::async_write(c->stream, req, asio::redirect_error(asio::use_awaitable, ec));
        http::response<http::string_body> res;
        if (!ec)
            co_await http::async_read(c->stream, c->buf, res, asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) {
            rep.status = res.result_int();
            rep.body = std::move(res.body());
            c->stream.expires_never();
            if (res.keep_alive())
                st->checkin(std::move(c));
            else
                st->discard(c);
            dlock::detail::post_completion(st->ex, std::move(h), ec, std::move(rep));
            co_return;
        }
        st->discard(c);
        if (st->closed) {
            ec = error::closed;
            break;
        }
        if (stale_failure(ec)) {
            drop_idle(*st);  // its idle siblings went the same way: not to fail on each in turn
            if (reused && idempotent && attempt == 0)
                continue;
        }
        ec = ec == beast::error::timeout ? error_code(error::timeout) : error_code(error::connection_lost);
        // The member failed us: the next connection tries another one first.
        if (ec != error::timeout && st->cfg.endpoints.size() > 1)
            st->current = (st->current + 1) % st->cfg.endpoints.size();
        break;
    }
    dlock::detail::post_completion(st->ex, std::move(h), ec, std::move(rep));
}

}  // namespace

http_pool::http_pool(asio::any_io_executor ex, const config& cfg) : st_(std::make_shared<state>(std::move(ex), cfg)) {}

http_pool::~http_pool()
{
    close();
}

void http_pool::post(std::string_view target, std::string body, handler h, std::chrono::milliseconds timeout,
                     bool urgent, bool idempotent)
{
    if (st_->closed) {
        dlock::detail::post_completion(st_->ex, std::move(h), error_code(error::closed), http_reply{});
        return;
    }
    asio::co_spawn(st_->ex, run(st_, std::string(target), std::move(body), timeout, urgent, idempotent, std::move(h)),
                   asio::detached);
}

std::string http_pool::current() const
{
    const auto& ep = st_->cfg.endpoints[st_->current];
    return ep.host + ":" + std::to_string(ep.port);
}

const endpoint& http_pool::pick() const
{
    return st_->cfg.endpoints[st_->current];
}

void http_pool::failed(const endpoint& ep)
{
    auto& cur = st_->cfg.endpoints[st_->current];
    if (cur.host == ep.host && cur.port == ep.port && st_->cfg.endpoints.size() > 1)
        st_->current = (st_->current + 1) % st_->cfg.endpoints.size();
}

void http_pool::close()
{
    if (st_->closed)
        return;
    st_->closed = true;
    for (auto& w : st_->all)
        if (auto c = w.lock()) {
            error_code ignored;
            c->stream.socket().cancel(ignored);
            c->stream.socket().close(ignored);
        }
    st_->idle.clear();
    while (!st_->waiters.empty()) {
        st_->waiters.front()->cancel();
        st_->waiters.pop_front();
    }
}

}  // namespace dlock::etcd::detail
