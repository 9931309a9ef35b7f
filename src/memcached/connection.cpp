// SPDX-License-Identifier: BSL-1.0
// The wire under the request pipe (src/common/request_pipe.hpp): the pipe decides when to
// connect, what to send, what a drop fails and when a request times out; this file resolves,
// connects, writes the batches and matches the replies to the oldest request on the wire.
#include "memcached/connection.hpp"

#include <dlock/error.hpp>

#include "common/pipe_host.hpp"
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

namespace dlock::memcached::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using namespace asio::experimental::awaitable_operators;
using dlock::detail::pipe_config;
using dlock::detail::post_completion;
using dlock::detail::request_pipe;
using time_point = request_pipe::time_point;
constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

namespace {

struct op {
    std::string bytes;
    std::size_t expected = 0;
    std::vector<proto::reply> replies;
    dlock::detail::stored_handler<connection::exec_signature> handler;
};

pipe_config pipe_settings(const connection_settings& s)
{
    pipe_config c;
    c.max_in_flight = 0;  // pipelined: every queued request goes in the next batch
    c.batches = true;
    c.deadline_from_request = true;  // queue wait and connect count, as the caller sees them
    c.request_timeout = s.request_timeout;
    return c;
}

}  // namespace

struct connection::impl : dlock::detail::pipe_host<impl, op>, std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor e, connection_settings s)
        : pipe_host(e, pipe_settings(s)), ex(e), cfg(std::move(s)), socket(e)
    {
    }

    asio::any_io_executor ex;
    connection_settings cfg;
    asio::ip::tcp::socket socket;
    std::string batch;  // the writes since the last flush
    proto::parser parser;

    void on_connect(std::uint64_t gen) { asio::co_spawn(ex, connect(shared_from_this(), gen), asio::detached); }
    void on_write(std::uint64_t, std::uint64_t id) { batch += find_request(id)->bytes; }

    void on_complete(std::uint64_t id, error_code ec)
    {
        if (auto o = take_request(id))
            post_completion(ex, std::move(o->handler), ec, ec ? std::vector<proto::reply>() : std::move(o->replies));
    }

    void on_reset(std::uint64_t gen)
    {
        error_code ignored;
        socket.close(ignored);  // the reader and a write in progress end as stale
        parser.clear();
        batch.clear();
        pipe.on_reset_done(gen, request_pipe::clock_type::now());
    }

    void on_flush(std::uint64_t gen)
    {
        auto bytes = std::make_shared<std::string>(std::exchange(batch, {}));
        asio::async_write(socket, asio::buffer(*bytes),
                          [self = shared_from_this(), bytes, gen](error_code ec, std::size_t) {
                              self->input([&](request_pipe& p, time_point now) {
                                  if (ec)
                                      p.on_dropped(gen, error::connection_lost, now);
                                  else
                                      p.on_written(gen, now);
                              });
                          });
    }

    // Resolves and connects within connect_timeout (its passing is `timeout`).
    static asio::awaitable<error_code> open(std::shared_ptr<impl> self, asio::ip::tcp::socket& sock)
    {
        asio::ip::tcp::resolver resolver(self->ex);
        auto [rec, endpoints] = co_await resolver.async_resolve(self->cfg.host, std::to_string(self->cfg.port), tuple);
        if (rec)
            co_return error::resolve_failed;
        if (self->cfg.connect_timeout.count() <= 0) {
            auto [cec, ep] = co_await asio::async_connect(sock, endpoints, tuple);
            co_return cec ? error_code(error::connect_failed) : error_code();
        }
        asio::steady_timer t(self->ex, self->cfg.connect_timeout);
        auto r = co_await (asio::async_connect(sock, endpoints, tuple) || t.async_wait(tuple));
        if (r.index() == 1)
            co_return error::timeout;
        co_return std::get<0>(std::get<0>(r)) ? error_code(error::connect_failed) : error_code();
    }

    static asio::awaitable<void> connect(std::shared_ptr<impl> self, std::uint64_t gen)
    {
        asio::ip::tcp::socket sock(self->ex);
        auto ec = co_await open(self, sock);
        bool current = gen == self->pipe.gen() && self->pipe.state() == dlock::detail::pipe_state::connecting;
        if (!ec && current) {  // else closed meanwhile: the socket goes with this frame
            error_code ignored;
            sock.set_option(asio::ip::tcp::no_delay(true), ignored);
            self->socket = std::move(sock);
            asio::co_spawn(self->ex, reader(self, gen), asio::detached);
        }
        self->connect_ended(gen, ec);
    }

    // Replies in order: each belongs to the oldest request on the wire until it has them all.
    static asio::awaitable<void> reader(std::shared_ptr<impl> self, std::uint64_t gen)
    {
        std::array<char, 16 * 1024> buf;
        for (;;) {
            auto [ec, n] = co_await self->socket.async_read_some(asio::buffer(buf), tuple);
            if (gen != self->pipe.gen())
                co_return;
            if (ec)
                co_return self->drop(gen, error::connection_lost);
            self->parser.feed({buf.data(), n});
            error_code perr;
            while (auto r = self->parser.next(perr)) {
                auto id = self->pipe.oldest_in_flight();
                if (!id)  // a reply nobody asked for
                    co_return self->drop(gen, error::protocol_error);
                auto& o = *self->find_request(id);
                o.replies.push_back(std::move(*r));
                if (o.replies.size() == o.expected)
                    self->input([&](request_pipe& p, time_point now) { p.on_reply(gen, id, {}, true, now); });
                if (gen != self->pipe.gen())
                    co_return;
            }
            if (perr)
                co_return self->drop(gen, perr);
        }
    }

    void drop(std::uint64_t gen, error_code ec)
    {
        input([&](request_pipe& p, time_point now) { p.on_dropped(gen, ec, now); });
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
    op o;
    o.bytes = std::move(bytes);
    o.expected = replies;
    o.handler = std::move(h);
    auto id = i.add_request(std::move(o));
    i.input([&](request_pipe& p, time_point now) { p.on_request(id, std::chrono::milliseconds(0), now); });
}

void connection::close()
{
    impl_->input([](request_pipe& p, time_point) { p.on_close(); });
}

}  // namespace dlock::memcached::detail
