// SPDX-License-Identifier: BSL-1.0
#include "common/tcp_proxy.hpp"

#include <boost/algorithm/string/predicate.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <charconv>
#include <deque>
#include <future>
#include <string_view>

namespace dlock::test {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct command {
    std::size_t size = 0;  // 0: not complete yet
    std::string name;
};

// The first complete command in `buf`: a RESP array of bulk strings, as clients send. Just
// enough parsing to know where a command ends and what it is called.
command first_command(std::string_view buf)
{
    auto number_at = [&](std::size_t from, std::size_t to, long& out) {
        return std::from_chars(buf.data() + from, buf.data() + to, out).ec == std::errc{};
    };
    auto eol = buf.find("\r\n");
    if (eol == std::string_view::npos)
        return {};
    long items = 0;
    if (buf[0] != '*' || !number_at(1, eol, items))  // an inline command: one line
        return {eol + 2, std::string(buf.substr(0, buf.find(' ')))};
    command c;
    std::size_t pos = eol + 2;
    for (long i = 0; i < items; ++i) {
        auto line_end = buf.find("\r\n", pos);
        if (line_end == std::string_view::npos)
            return {};
        long len = 0;
        std::size_t next = line_end + 2;
        if (buf[pos] == '$' && number_at(pos + 1, line_end, len)) {
            next += static_cast<std::size_t>(len) + 2;
            if (next > buf.size())
                return {};
            if (i == 0)
                c.name = std::string(buf.substr(line_end + 2, static_cast<std::size_t>(len)));
        }
        pos = next;
    }
    c.size = pos;
    return c;
}

}  // namespace

// One client connection and its upstream one. Everything bound for the client goes through
// `to_client`, drained by a single writer, so delayed replies and +OK answers keep order.
struct tcp_proxy::session {
    explicit session(tcp::socket c)
        : client(std::move(c)), server(client.get_executor()), wake(client.get_executor()), hold(client.get_executor())
    {
    }

    tcp::socket client, server;
    asio::steady_timer wake;  // cancelled when to_client gains a chunk
    asio::steady_timer hold;  // a chunk's delay
    std::deque<std::pair<clock_type::time_point, std::string>> to_client;
    bool closed = false;

    void push(clock_type::time_point due, std::string bytes)
    {
        to_client.emplace_back(due, std::move(bytes));
        wake.cancel();
    }

    void close()
    {
        closed = true;
        error_code ignored;
        client.close(ignored);
        server.close(ignored);
        wake.cancel();
        hold.cancel();
    }
};

tcp_proxy::tcp_proxy(std::uint16_t upstream_port, bool resp)
    : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), upstream_port_(upstream_port), resp_(resp)
{
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
}

tcp_proxy::~tcp_proxy()
{
    // Closing everything ends every coroutine, so run() returns for lack of work.
    asio::post(io_, [this] {
        error_code ignored;
        acceptor_.close(ignored);
        for (auto& w : sessions_)
            if (auto s = w.lock())
                s->close();
    });
    thread_.join();
}

std::size_t tcp_proxy::drop_connections()
{
    std::promise<std::size_t> closed;
    asio::post(io_, [&] {
        std::size_t n = 0;
        for (auto& w : sessions_)
            if (auto s = w.lock()) {
                s->close();
                ++n;
            }
        closed.set_value(n);
    });
    return closed.get_future().get();
}

std::size_t tcp_proxy::live_connections()
{
    std::promise<std::size_t> live;
    asio::post(io_, [&] {
        std::size_t n = 0;
        for (auto& w : sessions_)
            n += !w.expired();
        live.set_value(n);
    });
    return live.get_future().get();
}

std::string tcp_proxy::url() const
{
    return "redis://127.0.0.1:" + std::to_string(port_);
}

void tcp_proxy::pass_through()
{
    answer_ok_ = false;
    drop_requests_ = false;
    delay_ms_ = 0;
}

void tcp_proxy::drop_requests()
{
    drop_requests_ = true;
}

void tcp_proxy::delay_replies(std::chrono::milliseconds d)
{
    answer_ok_ = false;
    delay_ms_ = d.count();
}

void tcp_proxy::stall_replies(std::chrono::milliseconds d)
{
    stall_until_ = (clock_type::now() + d).time_since_epoch().count();
}

void tcp_proxy::answer_ok_to_everything()
{
    answer_ok_ = true;
}

std::size_t tcp_proxy::evals_forwarded() const
{
    std::lock_guard lk(mutex_);
    return evals_;
}

bool tcp_proxy::wait_for_evals(std::size_t n, std::chrono::milliseconds limit)
{
    std::unique_lock lk(mutex_);
    return evals_changed_.wait_for(lk, limit, [&] { return evals_ >= n; });
}

void tcp_proxy::on_eval_forwarded(std::function<void()> fn)
{
    std::lock_guard lk(mutex_);
    on_eval_ = std::move(fn);
}

void tcp_proxy::count_eval()
{
    std::function<void()> fn;
    {
        std::lock_guard lk(mutex_);
        ++evals_;
        fn = on_eval_;
    }
    evals_changed_.notify_all();
    if (fn)
        fn();
}

// The coroutines below use `this` freely: the destructor joins the thread before it goes.
asio::awaitable<void> tcp_proxy::accept_loop()
{
    for (;;) {
        auto [ec, sock] = co_await acceptor_.async_accept(use_tuple);
        if (ec)
            co_return;
        auto s = std::make_shared<session>(std::move(sock));
        std::erase_if(sessions_, [](auto& w) { return w.expired(); });
        sessions_.push_back(s);
        asio::co_spawn(io_, serve(s), asio::detached);
    }
}

asio::awaitable<void> tcp_proxy::serve(std::shared_ptr<session> s)
{
    auto [ec] =
        co_await s->server.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), upstream_port_), use_tuple);
    if (ec || s->closed) {
        s->close();
        co_return;
    }
    asio::co_spawn(io_, relay_requests(s), asio::detached);
    asio::co_spawn(io_, relay_replies(s), asio::detached);
    asio::co_spawn(io_, write_to_client(s), asio::detached);
}

// Client → server, a whole command at a time, so commands can be counted or answered here.
asio::awaitable<void> tcp_proxy::relay_requests(std::shared_ptr<session> s)
{
    char buf[16384];
    std::string pending;  // the start of a command not yet complete
    for (;;) {
        auto [ec, n] = co_await s->client.async_read_some(asio::buffer(buf), use_tuple);
        if (ec)
            break;
        if (drop_requests_) {
            dropped_ += n;
            continue;
        }
        if (!resp_) {
            auto [wec, written] = co_await asio::async_write(s->server, asio::buffer(buf, n), use_tuple);
            if (wec)
                break;
            continue;
        }
        pending.append(buf, n);
        for (auto c = first_command(pending); c.size != 0; c = first_command(pending)) {
            std::string bytes = pending.substr(0, c.size);
            pending.erase(0, c.size);
            if (answer_ok_) {
                s->push(clock_type::now(), "+OK\r\n");
                continue;
            }
            auto [wec, written] = co_await asio::async_write(s->server, asio::buffer(bytes), use_tuple);
            if (wec) {
                s->close();
                co_return;
            }
            if (boost::iequals(c.name, "EVAL") || boost::iequals(c.name, "EVALSHA"))
                count_eval();  // only now has the server got it
        }
    }
    s->close();
}

// Server → client: each chunk queued with its due time as soon as it is read, so a delay
// holds every chunk back the same time rather than adding up.
asio::awaitable<void> tcp_proxy::relay_replies(std::shared_ptr<session> s)
{
    char buf[16384];
    for (;;) {
        auto [ec, n] = co_await s->server.async_read_some(asio::buffer(buf), use_tuple);
        if (ec)
            break;
        auto due = clock_type::now() + std::chrono::milliseconds(delay_ms_.load());
        due = std::max(due, clock_type::time_point(clock_type::duration(stall_until_.load())));
        s->push(due, std::string(buf, n));
    }
    s->close();
}

// Sends what is bound for the client in order, each chunk no earlier than its due time.
asio::awaitable<void> tcp_proxy::write_to_client(std::shared_ptr<session> s)
{
    while (!s->closed) {
        if (s->to_client.empty()) {
            s->wake.expires_at(clock_type::time_point::max());
            co_await s->wake.async_wait(use_tuple);
            continue;
        }
        auto [due, bytes] = std::move(s->to_client.front());
        s->to_client.pop_front();
        s->hold.expires_at(due);
        co_await s->hold.async_wait(use_tuple);
        if (s->closed)
            break;
        auto [ec, n] = co_await asio::async_write(s->client, asio::buffer(bytes), use_tuple);
        if (ec)
            s->close();
    }
}

}  // namespace dlock::test
