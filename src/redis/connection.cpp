// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>

#include "common/backoff.hpp"
#include "common/post_completion.hpp"
#include "common/slot_allocator.hpp"
#include "common/stored_handler.hpp"
#include "redis/handshake.hpp"
#include "redis/request_queue.hpp"
#include "redis/resp/decoder.hpp"
#include "redis/sentinel.hpp"
#include "redis/stream.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/intrusive/list.hpp>

#include <algorithm>
#include <array>
#include <iterator>
#include <optional>
#include <random>
#include <unordered_set>

namespace dlock::redis {

namespace asio = boost::asio;
using boost::system::error_code;
using namespace asio::experimental::awaitable_operators;

namespace {

using dlock::detail::post_completion;

using deadline_hook = boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::auto_unlink>>;

struct exec_op final : detail::pending, deadline_hook, std::enable_shared_from_this<exec_op> {
    // One of the two: a request's handler gets every reply, a script call's its one reply.
    dlock::detail::stored_handler<connection::exec_signature> handler;
    dlock::detail::stored_handler<connection::script_signature> script;
    // A script call sent as EVALSHA keeps its payload while on the wire: after NOSCRIPT it
    // goes again as EVAL with the body and the same encoded keys and arguments (from tail_at).
    std::shared_ptr<const std::string> body;
    std::size_t tail_at = 0;
    std::size_t nargs = 0;
    // In the connection's deadline index (ordered by it) while linked.
    std::chrono::steady_clock::time_point deadline;
    asio::cancellation_slot slot;
    bool direct = false;  // its handler runs anywhere: called, not dispatched, when a reply ends it

    bool live() const noexcept { return handler || script; }
};

using deadline_list = boost::intrusive::list<exec_op, boost::intrusive::base_hook<deadline_hook>,
                                             boost::intrusive::constant_time_size<false>>;

// One script call as RESP: the command, the body or SHA1, then the encoded keys and
// arguments (request::push_encoded, as eval_request builds it for the cluster).
std::string encode_call(std::size_t nargs, std::string_view command, std::string_view first, std::string_view tail)
{
    request req;
    req.push_encoded(command, first, nargs, tail);
    return req.take_payload();
}

}  // namespace

struct connection::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor e, config c) : ex(std::move(e)), cfg(std::move(c)), backoff(ex), deadline_timer(ex) {}

    // Requests mostly share one timeout, so a new deadline is almost always the latest:
    // the index is a list kept in order from its back, with no allocation per request.
    void add_deadline(exec_op& op, std::chrono::steady_clock::time_point at)
    {
        op.deadline = at;
        auto it = deadlines.end();
        if (!deadlines.empty() && at < deadlines.front().deadline)
            it = deadlines.begin();  // a shorter timeout than all: no walk past them all
        while (it != deadlines.begin() && std::prev(it)->deadline > at)
            --it;
        deadlines.insert(it, op);
        if (at < armed_at)
            arm_deadlines(at);
    }

    void arm_deadlines(std::chrono::steady_clock::time_point at)
    {
        armed_at = at;
        deadline_timer.expires_at(at);
        deadline_timer.async_wait([weak = weak_from_this()](error_code ec) {
            auto self = weak.lock();
            if (ec || !self)
                return;  // re-armed earlier, or closed
            self->armed_at = std::chrono::steady_clock::time_point::max();
            auto now = std::chrono::steady_clock::now();
            while (!self->deadlines.empty() && self->deadlines.front().deadline <= now) {
                auto op = self->deadlines.front().shared_from_this();
                op->unlink();
                if (op->live())
                    self->give_up(*op, error::timeout);
            }
            if (!self->deadlines.empty())
                self->arm_deadlines(self->deadlines.front().deadline);
        });
    }

    asio::any_io_executor ex;
    config cfg;
    detail::request_queue queue;
    // The memory of the one read and the one write in flight, reused (slot_allocator.hpp);
    // declared before the socket, so that they outlive it.
    dlock::detail::op_slot read_slot, write_slot;
    std::optional<detail::stream> sock;
    resp::decoder decoder;
    bool writing = false;  // a batch is on its way to the socket
    std::string out;       // that batch's bytes (its capacity kept for the next one)
    // Replies dispatched from one read before the reader lets the requests they made go out.
    static constexpr std::size_t yield_every = 16;
    std::uint64_t generation = 0;  // bumped per lost connection: stale write callbacks ignore themselves
    asio::steady_timer backoff;    // reconnect delay
    // Request timeouts: one timer for the connection, armed at the earliest deadline, so a
    // request costs no timer of its own (and no timerfd update in the common case).
    deadline_list deadlines;
    asio::steady_timer deadline_timer;
    std::chrono::steady_clock::time_point armed_at = std::chrono::steady_clock::time_point::max();
    bool running = false;
    bool connected = false;
    bool closed = false;
    std::optional<push_hooks> push;
    connection_stats st;
    std::string server_message;
    std::unordered_set<std::string> scripts_sent;  // SHA1s sent with EVAL on this connection
    std::vector<std::shared_ptr<asio::any_completion_handler<connect_signature>>> connect_waiters;
    std::minstd_rand rng{std::random_device{}()};

    void start()
    {
        if (running || closed)
            return;
        running = true;
        asio::co_spawn(ex, run(shared_from_this()), asio::detached);
    }

    // What ended a request, which decides how its handler runs (one rule, per operation):
    // I/O (its reply, or the loss of the connection it was written on) ends it from our own
    // read loop, so the handler runs at once; anything else (rejected, cancelled, timed out,
    // closed) can happen inside a caller's frame, so the handler is posted.
    enum class ended_by {
        io,
        no_io
    };

    void complete(exec_op& op, error_code ec, ended_by how)
    {
        if (!op.live())
            return;
        op.unlink();
        if (op.slot.is_connected())
            op.slot.clear();
        if (ec == error::timeout)
            ++st.timeouts;
        if (ec == asio::error::operation_aborted)
            ++st.cancelled;
        if (op.script) {
            // The script's reply is the last one. A PING's may come first (ping_first): its
            // refusal (a user whose ACL lacks PING) costs only the early wake-up, not the call.
            reply r = !op.replies.empty() && op.replies.size() == op.expected ? std::move(op.replies.back()) : reply();
            if (!ec && r.is_error())
                ec = error::server_error;
            return finish(std::move(op.script), how, ec, std::move(r), op.direct);
        }
        if (!ec && std::any_of(op.replies.begin(), op.replies.end(), [](const reply& r) { return r.is_error(); }))
            ec = error::server_error;
        response all(std::make_move_iterator(op.replies.begin()), std::make_move_iterator(op.replies.end()));
        finish(std::move(op.handler), how, ec, std::move(all), op.direct);
    }

    template <class Handler, class Result>
    void finish(Handler h, ended_by how, error_code ec, Result r, bool direct)
    {
        if (how == ended_by::io && direct)
            std::move(h)(ec, std::move(r));
        else if (how == ended_by::io)
            asio::dispatch(ex, asio::append(std::move(h), ec, std::move(r)));
        else
            post_completion(ex, std::move(h), ec, std::move(r));
    }

    // NOSCRIPT (the server restarted, failed over or flushed its scripts): the same call
    // again as EVAL, which loads the script; it goes behind what is queued now.
    bool reload(const std::shared_ptr<exec_op>& op)
    {
        if (!op->body || op->replies.empty() || !op->replies.back().is_error() ||
            op->replies.back().str.rfind("NOSCRIPT", 0) != 0 || !op->live())
            return false;
        ++st.noscript_reloads;
        std::string_view tail(op->payload);
        tail.remove_prefix(op->tail_at);
        op->payload = encode_call(op->nargs, "EVAL", *op->body, tail);  // without a PING before it
        op->expected = 1;
        op->body.reset();
        op->keep_payload = false;
        op->replies.clear();
        op->received = 0;
        op->state = detail::pending_state::queued;
        queue.push(op);
        start_write();
        return true;
    }

    // Queues a request whose handler is set: its cancellation, its deadline, the write.
    void start_op(std::shared_ptr<exec_op> op, std::chrono::milliseconds timeout)
    {
        ++st.requests;
        if (op->slot.is_connected()) {
            op->slot.assign([weak = weak_from_this(), wop = std::weak_ptr(op)](asio::cancellation_type type) {
                auto self = weak.lock();
                auto op = wop.lock();
                if (!self || !op || !op->live())
                    return;
                // A written request cannot be unsent: only terminal/partial cancellation may
                // abandon it (its reply is dropped later); total cancellation needs no effect.
                if (op->state != detail::pending_state::queued &&
                    (type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                        asio::cancellation_type::none)
                    return;
                self->give_up(*op, asio::error::operation_aborted);
            });
        }
        if (timeout.count() > 0)
            add_deadline(*op, std::chrono::steady_clock::now() + timeout);
        queue.push(std::move(op));
        start();
        start_write();
    }

    void give_up(exec_op& op, error_code ec)
    {
        queue.cancel(op);
        complete(op, ec, ended_by::no_io);
    }

    void finish_connect_waiters(error_code ec)
    {
        auto waiters = std::move(connect_waiters);
        connect_waiters.clear();
        for (auto& w : waiters) {
            if (*w)
                post_completion(ex, std::move(*w), ec);
        }
    }

    void fail_all(std::vector<std::shared_ptr<detail::pending>> ops, error_code ec, ended_by how)
    {
        for (auto& p : ops) {
            if (auto* op = dynamic_cast<exec_op*>(p.get()))
                complete(*op, ec, how);
        }
    }

    void dispatch_reply(reply&& r)
    {
        if (push) {
            if (push->on_push)
                push->on_push(std::move(r));
            return;
        }
        error_code ec;
        auto done = queue.on_reply(std::move(r), ec);
        if (ec)
            throw boost::system::system_error(ec);
        if (!done || done->state != detail::pending_state::done)
            return;
        auto op = std::static_pointer_cast<exec_op>(std::move(done));
        if (!reload(op))
            complete(*op, {}, ended_by::io);
    }

    asio::awaitable<void> reader()
    {
        std::array<char, 64 * 1024> buf;
        for (;;) {
            // A heuristic (either way is correct): with at most one request on the wire its
            // reply is rarely back before this read starts, so a short read marks the socket
            // drained and the next read waits for epoll instead of a recv that finds nothing;
            // with a pipelined burst on the wire the early attempt often finds replies.
            const bool drain = queue.written_count() + queue.queued_count() <= 1;
            std::size_t n = co_await sock->async_read_some(
                asio::buffer(buf), drain,
                asio::bind_allocator(dlock::detail::slot_allocator<void>(read_slot), asio::use_awaitable));
            decoder.feed({buf.data(), n});
            error_code ec;
            bool demoted = false;
            std::size_t since_yield = 0;
            while (auto r = decoder.next(ec)) {
                // Through Sentinel, a READONLY refusal means our master was demoted behind
                // our back: drop the connection so the reconnect asks the sentinels again.
                demoted = demoted || (!cfg.sentinel.master_name.empty() && r->is_error() &&
                                      r->str.find("READONLY") != std::string::npos);
                dispatch_reply(std::move(*r));
                // A read of many replies: once `yield_every` of them are dispatched and their
                // handlers queued requests, let those go out, so the server works on them
                // while we go on (else client and server take turns, each idle in turn).
                if (++since_yield >= yield_every && queue.has_queued()) {
                    since_yield = 0;
                    co_await asio::post(ex, asio::use_awaitable);
                    if (closed)
                        co_return;
                }
            }
            if (ec)
                throw boost::system::system_error(ec);
            if (demoted)
                throw boost::system::system_error(error::connection_lost);
        }
    }

    // Writes everything queued in one batch; while a write is in flight, new requests queue
    // up and go out together in the next one. Started from the request itself: no hop.
    void start_write()
    {
        if (writing || !connected || !queue.has_queued())
            return;
        writing = true;
        out.clear();
        queue.take_batch(out);
        ++st.batches;
        // `writing` stays set until this completion runs, even after its connection is
        // gone: `out` is this write's until then, whatever the next connection does.
        auto alloc = dlock::detail::slot_allocator<void>(write_slot);
        sock->async_write(asio::buffer(out), asio::bind_allocator(alloc, [self = shared_from_this(), gen = generation](
                                                                             error_code ec, std::size_t) {
                              self->writing = false;
                              if (self->out.capacity() > 1024 * 1024)
                                  std::string().swap(self->out);  // a burst's buffer is not kept for good
                              if (gen != self->generation)
                                  return self->start_write();  // that connection is gone: the next one writes
                              if (ec) {
                                  self->sock->close();  // the reader fails and ends the connection
                                  return;
                              }
                              self->start_write();
                          }));
    }

    // Runs the handshake (detail::handshake) over the fresh socket, reading replies with the
    // shared decoder.
    asio::awaitable<error_code> handshake()
    {
        detail::handshake hs(cfg);
        if (hs.done())
            co_return error_code();
        co_await sock->write(asio::buffer(hs.request()));
        std::array<char, 4096> buf;
        while (!hs.done()) {
            std::size_t n = co_await sock->async_read_some(
                asio::buffer(buf), false,  // the handshake's replies come together
                asio::bind_allocator(dlock::detail::slot_allocator<void>(read_slot), asio::use_awaitable));
            decoder.feed({buf.data(), n});
            error_code ec;
            while (!hs.done()) {
                auto r = decoder.next(ec);
                if (ec)
                    co_return ec;
                if (!r)
                    break;
                hs.feed(*r);
            }
        }
        if (hs.error())
            server_message = hs.said();
        co_return hs.error();
    }

    asio::awaitable<error_code> connect_once()
    {
        if (!cfg.sentinel.master_name.empty()) {
            if (auto ec = co_await detail::discover_master(ex, cfg, server_message))
                co_return ec;
            if (closed)  // close() came while we asked the sentinels
                co_return error::closed;
        }
        sock.emplace(ex, cfg);
        decoder.reset();
        auto attempt = [this]() -> asio::awaitable<error_code> {
            error_code ec = co_await sock->connect();
            if (ec)
                co_return ec;
            try {
                co_return co_await handshake();
            } catch (const boost::system::system_error&) {
                // The server closed on us mid-handshake: a TLS server spoken to in plain
                // text, or a server that went away.
                co_return error::connect_failed;
            }
        };
        if (cfg.connect_timeout.count() == 0)
            co_return co_await attempt();
        asio::steady_timer timer(ex, cfg.connect_timeout);
        auto result = co_await (attempt() || timer.async_wait(asio::use_awaitable));
        if (result.index() == 1)
            co_return error::timeout;
        co_return std::get<0>(result);
    }

    static asio::awaitable<void> run(std::shared_ptr<impl> self)
    {
        dlock::detail::backoff delay(self->cfg.reconnect_min, self->cfg.reconnect_max);
        while (!self->closed) {
            error_code ec;
            try {
                ec = co_await self->connect_once();
            } catch (const boost::system::system_error& e) {
                ec = e.code();
            }
            if (self->closed)
                break;
            if (!ec) {
                ++self->st.connects;
                self->connected = true;
                delay.reset();
                if (self->push && self->push->on_connected)
                    self->push->on_connected();
                self->finish_connect_waiters({});
                // The reader runs the connection; a failed write closes the socket under it.
                self->start_write();
                try {
                    co_await self->reader();
                } catch (const boost::system::system_error& e) {
                    ec = e.code();
                }
                self->connected = false;
                self->scripts_sent.clear();  // the next server (or this one restarted) may not have them
                ++self->generation;
                self->sock->close();
                if (!self->closed && self->push && self->push->on_disconnected)
                    self->push->on_disconnected(ec);
                self->fail_all(self->queue.take_written(), error::connection_lost, ended_by::io);
                self->fail_all(self->queue.take_pinned(), error::connection_lost, ended_by::no_io);
                if (self->closed)
                    break;
            } else {
                ++self->st.connect_failures;
                if (self->sock)  // none when Sentinel discovery failed before the connect
                    self->sock->close();
                self->finish_connect_waiters(ec);
            }
            // Jitter spreads the herd of clients that lost the same server.
            self->backoff.expires_after(delay.next(self->rng));
            error_code ignored;
            co_await self->backoff.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        }
        self->running = false;
    }

    void close()
    {
        if (closed)
            return;
        closed = true;
        connected = false;
        if (sock)
            sock->close();
        backoff.cancel();
        deadline_timer.cancel();
        fail_all(queue.take_all(), error::closed, ended_by::no_io);
        finish_connect_waiters(error::closed);
    }
};

connection::connection(executor_type ex, config cfg) : impl_(std::make_shared<impl>(std::move(ex), std::move(cfg))) {}

connection::~connection()
{
    impl_->close();
}

connection::executor_type connection::get_executor() const noexcept
{
    return impl_->ex;
}
const config& connection::get_config() const noexcept
{
    return impl_->cfg;
}
bool connection::is_connected() const noexcept
{
    return impl_->connected;
}
const connection_stats& connection::stats() const noexcept
{
    return impl_->st;
}
const std::string& connection::last_server_message() const noexcept
{
    return impl_->server_message;
}
void connection::close()
{
    impl_->close();
}

void connection::reconnect()
{
    if (impl_->closed)
        return;
    if (impl_->connected && impl_->sock) {
        // Not connected from now on: a request made meanwhile (say by a reply's handler
        // while the reader pauses) waits for the next connection instead of being
        // written to this closing one and failed with it.
        impl_->connected = false;
        impl_->sock->close();  // the reader fails; the run loop reconnects
    } else
        impl_->backoff.cancel();  // between attempts: try again now
}

void connection::set_push_mode(push_hooks hooks)
{
    impl_->push = std::move(hooks);
}

void connection::send(const request& req, bool before_queued)
{
    send(request(req), before_queued);
}

void connection::send(request&& req, bool before_queued)
{
    auto p = std::make_shared<detail::pending>();
    p->payload = req.take_payload();
    p->expected = 0;
    if (before_queued)
        impl_->queue.push_front(std::move(p));
    else
        impl_->queue.push(std::move(p));
    impl_->start();
    impl_->start_write();
}

void connection::connect_impl(asio::any_completion_handler<connect_signature> h)
{
    auto& i = *impl_;
    if (i.closed)
        return post_completion(i.ex, std::move(h), error_code(error::closed));
    if (i.connected)
        return post_completion(i.ex, std::move(h), error_code());
    auto slot = asio::get_associated_cancellation_slot(h);
    auto waiter = std::make_shared<asio::any_completion_handler<connect_signature>>(std::move(h));
    if (slot.is_connected()) {
        slot.assign([w = std::weak_ptr(waiter), weak = std::weak_ptr(impl_)](asio::cancellation_type) {
            auto self = weak.lock();
            auto waiter = w.lock();
            if (!self || !waiter || !*waiter)
                return;
            std::erase(self->connect_waiters, waiter);
            post_completion(self->ex, std::move(*waiter), error_code(asio::error::operation_aborted));
        });
    }
    i.connect_waiters.push_back(std::move(waiter));
    i.start();
}

std::uint64_t connection::generation() const noexcept
{
    return impl_->generation;
}

void connection::pinned_impl(const request& req, std::uint64_t generation,
                             asio::any_completion_handler<exec_signature> h)
{
    auto& i = *impl_;
    if (!i.closed && (!i.connected || i.generation != generation))
        return post_completion(i.ex, std::move(h), error_code(error::connection_lost), response());
    exec_impl(req, i.cfg.request_timeout, std::move(h), true, false);
}

void connection::exec_impl(const request& req, std::chrono::milliseconds timeout,
                           asio::any_completion_handler<exec_signature> h, bool pinned, bool direct)
{
    exec_owned(req.payload(), req.size(), timeout, std::move(h), pinned, direct);
}

void connection::exec_owned(std::string payload, std::size_t commands, std::chrono::milliseconds timeout,
                            asio::any_completion_handler<exec_signature> h, bool pinned, bool direct)
{
    auto& i = *impl_;
    if (i.closed)
        return post_completion(i.ex, std::move(h), error_code(error::closed), response());
    if (commands == 0)
        return post_completion(i.ex, std::move(h), error_code(error::invalid_request), response());
    auto op = std::make_shared<exec_op>();
    op->payload = std::move(payload);
    op->expected = commands;
    op->pinned = pinned;
    op->direct = direct;
    op->replies.reserve(commands);
    op->slot = asio::get_associated_cancellation_slot(h);
    op->handler = std::move(h);
    i.start_op(std::move(op), timeout);
}

void connection::eval_impl(const script& s, std::span<const std::string> keys, std::span<const std::string> args,
                           asio::any_completion_handler<script_signature> h, bool direct)
{
    std::size_t bytes = 16;
    for (const auto& k : keys)
        bytes += k.size() + 16;
    for (const auto& a : args)
        bytes += a.size() + 16;
    script_args all(keys.size(), bytes);
    for (const auto& k : keys)
        all.add(std::string_view(k));
    for (const auto& a : args)
        all.add(std::string_view(a));
    eval_impl(s, std::move(all), std::move(h), direct);
}

// A script call is one request whose handler takes its one reply: no second request or
// handler wraps it. Its first use on this connection goes as EVAL, which loads it: an
// EVALSHA refused with NOSCRIPT is sent again *after* requests pipelined behind it, and
// that would reorder them (a release overtaken by the next acquire).
void connection::eval_impl(const script& s, script_args&& args, asio::any_completion_handler<script_signature> h,
                           bool direct)
{
    auto& i = *impl_;
    if (i.closed)
        return post_completion(i.ex, std::move(h), error_code(error::closed), reply());
    if (args.keys() > args.count())  // fewer values than the keys it announced: Redis would refuse it
        return post_completion(i.ex, std::move(h), error_code(error::invalid_request), reply());
    auto op = std::make_shared<exec_op>();
    op->nargs = 2 + args.count() + 1;  // EVAL(SHA), body or sha1, numkeys, keys and arguments
    bool load = !i.scripts_sent.contains(s.sha1());
    if (load)
        i.scripts_sent.insert(s.sha1());
    const std::string& first = load ? s.body() : s.sha1();
    const bool ping = args.pings_first();
    op->payload = std::move(args).take_command(load ? "EVAL" : "EVALSHA", first, op->tail_at);
    if (!load) {
        op->body = s.shared_body();
        op->keep_payload = true;
    }
    op->expected = ping ? 2 : 1;
    op->direct = direct;
    op->slot = asio::get_associated_cancellation_slot(h);
    op->script = std::move(h);
    i.start_op(std::move(op), i.cfg.request_timeout);
}

}  // namespace dlock::redis
