// SPDX-License-Identifier: BSL-1.0
// A stream socket read that tells Asio's reactor when it drained the socket, so that the
// next read waits for epoll instead of first trying a recv that finds nothing.
//
// Asio 1.26 (Boost 1.81) tries every read at once ("speculatively") unless the last one
// reported the socket exhausted, which it does only when a read returns no bytes (end of
// file, an error). A connection that reads
// one reply per request therefore makes a failing recv after each reply: one system call in
// four on the uncontended cycle (about 1.2 µs each on the bench VM). Here a short read (fewer
// bytes than asked for: the socket's receive queue was empty when it returned) counts as
// exhausted; data that arrives later raises a new epoll edge, which re-enables the attempt.
// (A short read with data still queued happens only at TCP urgent data or a unix socket's
// passed credentials or descriptors, neither of which a Redis connection sees.)
// The caller says when to do so: with many replies due (a pipelined burst), a read started
// right after the last one often finds the next replies already there, and the early
// attempt saves an epoll wait (measured: 64 names on one connection halved without it).
// Built on asio::detail, so only for the version and reactor it was written against; any
// other falls back to the socket's own async_read_some.
#pragma once

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/version.hpp>

#if BOOST_ASIO_VERSION == 102600 && defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define DLOCK_DRAINED_READ 1
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/memory.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#else
#define DLOCK_DRAINED_READ 0
#endif

#include <cstddef>
#include <memory>
#include <utility>

namespace dlock::redis::detail {

#if DLOCK_DRAINED_READ
namespace drained {

namespace ad = boost::asio::detail;

// The socket's implementation (descriptor, state, reactor registration), which Asio keeps
// protected: a pointer to the member, formed through a derived class, reads it legally.
template <class Socket>
struct impl_of : Socket {
    static constexpr auto member = &impl_of::impl_;
};

// Asio's recv operation with one change: a short read reports the socket exhausted.
template <class Handler, class IoExecutor>
class recv_op : public ad::reactor_op {
public:
    BOOST_ASIO_DEFINE_HANDLER_PTR(recv_op);

    recv_op(ad::socket_type s, boost::asio::mutable_buffer b, bool drain, Handler& h, const IoExecutor& ex)
        : ad::reactor_op(boost::system::error_code(), &recv_op::do_perform, &recv_op::do_complete), socket_(s), buf_(b),
          drain_(drain), handler_(std::move(h)), work_(handler_, ex)
    {
    }

    static status do_perform(ad::reactor_op* base)
    {
        auto* o = static_cast<recv_op*>(base);
        if (!ad::socket_ops::non_blocking_recv1(o->socket_, o->buf_.data(), o->buf_.size(), 0, true, o->ec_,
                                                o->bytes_transferred_))
            return not_done;
        const bool drained = o->drain_ && o->bytes_transferred_ < o->buf_.size();
        return o->bytes_transferred_ == 0 || drained ? done_and_exhausted : done;  // 0: as Asio's
    }

    // As Asio's own: take the handler and its work out of the operation, free the
    // operation's memory, then call the handler.
    static void do_complete(void* owner, ad::operation* base, const boost::system::error_code&, std::size_t)
    {
        auto* o = static_cast<recv_op*>(base);
        ptr p = {std::addressof(o->handler_), o, o};
        ad::handler_work<Handler, IoExecutor> w(std::move(o->work_));
        ad::binder2<Handler, boost::system::error_code, std::size_t> handler(o->handler_, o->ec_,
                                                                             o->bytes_transferred_);
        p.h = std::addressof(handler.handler_);
        p.reset();
        if (owner) {
            ad::fenced_block b(ad::fenced_block::half);
            w.complete(handler, handler.handler_);
        }
    }

private:
    ad::socket_type socket_;
    boost::asio::mutable_buffer buf_;
    bool drain_;
    Handler handler_;
    ad::handler_work<Handler, IoExecutor> work_;
};

// Per-operation cancellation, as Asio's reactor_op_cancellation (protected there).
class cancellation {
public:
    cancellation(ad::reactor* r, ad::reactor::per_descriptor_data* d, ad::socket_type s)
        : reactor_(r), data_(d), socket_(s)
    {
    }
    void operator()(boost::asio::cancellation_type_t type)
    {
        using ct = boost::asio::cancellation_type;
        if (!!(type & (ct::terminal | ct::partial | ct::total)))
            reactor_->cancel_ops_by_key(socket_, *data_, ad::reactor::read_op, this);
    }

private:
    ad::reactor* reactor_;
    ad::reactor::per_descriptor_data* data_;
    ad::socket_type socket_;
};

}  // namespace drained
#endif

/// `s.async_read_some(b, token)`, except that with `drain` a short read marks the socket
/// drained (the next read then waits for epoll before trying).
template <class Protocol, class Executor, class Token>
auto async_read_drained(boost::asio::basic_stream_socket<Protocol, Executor>& s, boost::asio::mutable_buffer b,
                        bool drain, Token&& token)
{
#if DLOCK_DRAINED_READ
    using socket_type = boost::asio::basic_stream_socket<Protocol, Executor>;
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [&s, drain](auto handler, boost::asio::mutable_buffer b) {
            namespace ad = boost::asio::detail;
            using op = drained::recv_op<decltype(handler), Executor>;
            auto& impl = (s.*drained::impl_of<socket_type>::member).get_implementation();
            auto& reactor = boost::asio::use_service<ad::reactor>(
                boost::asio::query(s.get_executor(), boost::asio::execution::context));
            const bool continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
            auto slot = boost::asio::get_associated_cancellation_slot(handler);
            typename op::ptr p = {std::addressof(handler), op::ptr::allocate(handler), nullptr};
            p.p = new (p.v) op(impl.socket_, b, drain, handler, s.get_executor());
            if (slot.is_connected())
                p.p->cancellation_key_ =
                    &slot.template emplace<drained::cancellation>(&reactor, &impl.reactor_data_, impl.socket_);
            // As Asio's start_op: an empty read completes at once; the socket goes into
            // non-blocking mode before its first operation.
            if (b.size() != 0 && ((impl.state_ & ad::socket_ops::non_blocking) ||
                                  ad::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true, p.p->ec_)))
                reactor.start_op(ad::reactor::read_op, impl.socket_, impl.reactor_data_, p.p, continuation, true);
            else
                reactor.post_immediate_completion(p.p, continuation);
            p.v = p.p = nullptr;
        },
        token, b);
#else
    (void)drain;
    return s.async_read_some(b, std::forward<Token>(token));
#endif
}

}  // namespace dlock::redis::detail
