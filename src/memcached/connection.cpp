// SPDX-License-Identifier: BSL-1.0
#include "memcached/connection.hpp"

#include <dlock/error.hpp>

#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <deque>

namespace dlock::memcached::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using namespace asio::experimental::awaitable_operators;
using dlock::detail::post_completion;

namespace {

struct op {
    std::string bytes;
    std::size_t expected = 0;
    std::vector<proto::reply> replies;
    dlock::detail::stored_handler<connection::exec_signature> handler;
    std::unique_ptr<asio::steady_timer> deadline;
    bool done = false;
};

}  // namespace

struct connection::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor e, connection_settings s) : ex(e), cfg(std::move(s)), socket(e) {}

    enum class state {
        idle,
        connecting,
        connected,
        closed
    };
    asio::any_io_executor ex;
    connection_settings cfg;
    asio::ip::tcp::socket socket;
    state st = state::idle;
    std::uint64_t generation = 0;  // bumped per connection: stale reads and writes ignore themselves
    std::uint64_t connects = 0;
    std::deque<std::shared_ptr<op>> queued, written;
    std::vector<dlock::detail::stored_handler<void(error_code)>> connect_waiters;
    bool writing = false;
    proto::parser parser;

    void complete(op& o, error_code ec)
    {
        if (o.done)
            return;
        o.done = true;
        if (o.deadline)
            o.deadline->cancel();
        post_completion(ex, std::move(o.handler), ec, ec ? std::vector<proto::reply>() : std::move(o.replies));
    }

    void fail_all(std::deque<std::shared_ptr<op>>& q, error_code ec)
    {
        auto ops = std::move(q);
        q.clear();
        for (auto& o : ops)
            complete(*o, ec);
    }

    void finish_connect_waiters(error_code ec)
    {
        auto w = std::move(connect_waiters);
        connect_waiters.clear();
        for (auto& h : w)
            post_completion(ex, std::move(h), ec);
    }

    // The connection is unusable (read error, timeout, nonsense): what is on the wire may
    // or may not have run; what is queued waits for the next connection.
    void drop(error_code ec)
    {
        if (st != state::connected)
            return;
        error_code ignored;
        socket.close(ignored);
        st = state::idle;
        ++generation;
        writing = false;
        parser.clear();
        fail_all(written, ec);
        if (!queued.empty())
            start_connect();
    }

    void start_connect()
    {
        if (st != state::idle)
            return;
        st = state::connecting;
        asio::co_spawn(ex, connect_once(shared_from_this()), asio::detached);
    }

    static asio::awaitable<void> connect_once(std::shared_ptr<impl> self)
    {
        error_code ec;
        asio::ip::tcp::resolver resolver(self->ex);
        auto [rec, endpoints] = co_await resolver.async_resolve(self->cfg.host, std::to_string(self->cfg.port),
                                                                asio::as_tuple(asio::use_awaitable));
        if (rec) {
            ec = error::resolve_failed;
        } else {
            asio::ip::tcp::socket sock(self->ex);
            if (self->cfg.connect_timeout.count() > 0) {
                asio::steady_timer t(self->ex, self->cfg.connect_timeout);
                auto r = co_await (asio::async_connect(sock, endpoints, asio::as_tuple(asio::use_awaitable)) ||
                                   t.async_wait(asio::as_tuple(asio::use_awaitable)));
                if (r.index() == 1)
                    ec = error::timeout;
                else if (std::get<0>(std::get<0>(r)))
                    ec = error::connect_failed;
            } else {
                auto [cec, ep] = co_await asio::async_connect(sock, endpoints, asio::as_tuple(asio::use_awaitable));
                if (cec)
                    ec = error::connect_failed;
            }
            if (!ec && self->st == state::connecting) {
                error_code ignored;
                sock.set_option(asio::ip::tcp::no_delay(true), ignored);
                self->socket = std::move(sock);
            }
        }
        if (self->st != state::connecting)  // closed meanwhile
            co_return;
        if (ec) {
            self->st = state::idle;
            self->fail_all(self->queued, ec);
            self->finish_connect_waiters(ec);
            co_return;
        }
        self->st = state::connected;
        ++self->connects;
        self->finish_connect_waiters({});
        asio::co_spawn(self->ex, reader(self, self->generation), asio::detached);
        self->start_write();
    }

    static asio::awaitable<void> reader(std::shared_ptr<impl> self, std::uint64_t gen)
    {
        std::array<char, 16 * 1024> buf;
        for (;;) {
            auto [ec, n] =
                co_await self->socket.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
            if (gen != self->generation || self->st != state::connected)
                co_return;
            if (ec)
                co_return self->drop(error::connection_lost);
            self->parser.feed({buf.data(), n});
            error_code perr;
            while (auto r = self->parser.next(perr)) {
                if (self->written.empty()) {
                    perr = error::protocol_error;  // a reply nobody asked for
                    break;
                }
                auto& front = *self->written.front();
                front.replies.push_back(std::move(*r));
                if (front.replies.size() == front.expected) {
                    auto o = std::move(self->written.front());
                    self->written.pop_front();
                    self->complete(*o, {});
                }
            }
            if (perr)
                co_return self->drop(perr);
        }
    }

    void start_write()
    {
        if (writing || st != state::connected || queued.empty())
            return;
        writing = true;
        auto batch = std::make_shared<std::string>();
        while (!queued.empty()) {
            *batch += queued.front()->bytes;
            written.push_back(std::move(queued.front()));
            queued.pop_front();
        }
        asio::async_write(socket, asio::buffer(*batch),
                          [self = shared_from_this(), batch, gen = generation](error_code ec, std::size_t) {
                              if (gen != self->generation)
                                  return;
                              self->writing = false;
                              if (ec)
                                  return self->drop(error::connection_lost);
                              self->start_write();
                          });
    }

    void on_deadline(const std::shared_ptr<op>& o)
    {
        if (o->done)
            return;
        auto it = std::find(queued.begin(), queued.end(), o);
        if (it != queued.end()) {
            queued.erase(it);
            return complete(*o, error::timeout);
        }
        // On the wire: the replies behind it can no longer be matched. Reset.
        complete(*o, error::timeout);
        drop(error::connection_lost);
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

void connection::exec(std::string bytes, std::size_t replies, asio::any_completion_handler<exec_signature> h)
{
    auto& i = *impl_;
    if (i.st == impl::state::closed)
        return post_completion(i.ex, std::move(h), error_code(error::closed), std::vector<proto::reply>());
    auto o = std::make_shared<op>();
    o->bytes = std::move(bytes);
    o->expected = replies;
    o->handler = std::move(h);
    if (i.cfg.request_timeout.count() > 0) {
        o->deadline = std::make_unique<asio::steady_timer>(i.ex, i.cfg.request_timeout);
        o->deadline->async_wait([weak = std::weak_ptr<impl>(impl_), wo = std::weak_ptr<op>(o)](error_code ec) {
            auto self = weak.lock();
            auto op = wo.lock();
            if (!ec && self && op)
                self->on_deadline(op);
        });
    }
    i.queued.push_back(std::move(o));
    if (i.st == impl::state::idle)
        i.start_connect();
    i.start_write();
}

void connection::connect(asio::any_completion_handler<void(error_code)> h)
{
    auto& i = *impl_;
    if (i.st == impl::state::closed)
        return post_completion(i.ex, std::move(h), error_code(error::closed));
    if (i.st == impl::state::connected)
        return post_completion(i.ex, std::move(h), error_code());
    i.connect_waiters.push_back(std::move(h));
    i.start_connect();
}

bool connection::is_connected() const noexcept
{
    return impl_->st == impl::state::connected;
}

std::uint64_t connection::connects() const noexcept
{
    return impl_->connects;
}

void connection::close()
{
    auto& i = *impl_;
    if (i.st == impl::state::closed)
        return;
    i.st = impl::state::closed;
    ++i.generation;
    error_code ignored;
    i.socket.close(ignored);
    i.fail_all(i.written, error::closed);
    i.fail_all(i.queued, error::closed);
    i.finish_connect_waiters(error::closed);
}

}  // namespace dlock::memcached::detail
