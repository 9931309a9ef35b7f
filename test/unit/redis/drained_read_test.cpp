// SPDX-License-Identifier: BSL-1.0
// The read that marks a socket drained after a short read (redis/drained_read.hpp): data is
// never missed, whether it comes while a read waits, between two reads, or is left over by a
// full read; cancellation, close and end of file end a waiting read; its memory comes from
// the handler's allocator. Each run is bounded, so a lost wake-up fails instead of hanging.
#include "common/slot_allocator.hpp"
#include "redis/drained_read.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>

namespace asio = boost::asio;
using boost::system::error_code;
using dlock::redis::detail::async_read_drained;
using tcp = asio::ip::tcp;

namespace {

struct tcp_pair {
    asio::io_context io;
    tcp::socket ours{io}, theirs{io};
    tcp_pair()
    {
        tcp::acceptor acc(io, {asio::ip::make_address("127.0.0.1"), 0});
        ours.connect(acc.local_endpoint());
        acc.accept(theirs);
    }
    // Blocks until the peer's bytes are in our receive queue (no reactor involved).
    void wait_readable()
    {
        pollfd p{ours.native_handle(), POLLIN, 0};
        BOOST_REQUIRE(::poll(&p, 1, 5000) == 1);
    }
    void send(const std::string& s) { asio::write(theirs, asio::buffer(s)); }
};

struct outcome {
    std::optional<error_code> ec;
    std::size_t n = 0;
};

// Lets the reactor take the epoll events that are due while no read waits.
void take_events(asio::io_context& io)
{
    auto guard = asio::make_work_guard(io);
    io.restart();
    io.poll();
}

// Bytes queued in the socket that nobody has read, without reading them.
std::size_t queued_bytes(int fd)
{
    char b[64];
    auto n = ::recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 ? std::size_t(n) : 0;
}

// Starts a read into `buf` and runs the loop until it completes (at most 5 s).
template <class Socket, std::size_t N>
outcome read_once(asio::io_context& io, Socket& s, std::array<char, N>& buf, bool drain = true)
{
    outcome out;
    async_read_drained(s, asio::buffer(buf), drain, [&](error_code ec, std::size_t n) {
        out.ec = ec;
        out.n = n;
    });
    io.restart();
    io.run_for(std::chrono::seconds(5));
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(drained_read_suite)

BOOST_AUTO_TEST_CASE(a_waiting_read_gets_data_that_comes_later_each_time)
{
    tcp_pair p;
    std::array<char, 64> buf;
    for (std::string msg : {"abc", "de", "fghij"}) {
        outcome out;
        async_read_drained(p.ours, asio::buffer(buf), true, [&](error_code ec, std::size_t n) {
            out.ec = ec;
            out.n = n;
        });
        p.io.restart();
        p.io.poll();  // the read is waiting: nothing has come yet
        BOOST_TEST(!out.ec.has_value());
        p.send(msg);
        p.io.restart();
        p.io.run_for(std::chrono::seconds(5));
        BOOST_REQUIRE(out.ec.has_value());
        BOOST_TEST(!*out.ec);
        BOOST_TEST(std::string(buf.data(), out.n) == msg);
    }
}

BOOST_AUTO_TEST_CASE(compiled_in_here)
{
    BOOST_TEST(DLOCK_DRAINED_READ == 1);  // Boost 1.81 with epoll: an upgrade must not drop it unseen
}

BOOST_AUTO_TEST_CASE(after_a_short_read_the_next_read_waits_for_epoll)
{
    tcp_pair p;
    std::array<char, 64> buf;
    for (bool drain : {true, false}) {
        p.send("abc");
        p.wait_readable();
        take_events(p.io);
        auto first = read_once(p.io, p.ours, buf, drain);  // a short read
        BOOST_REQUIRE(first.ec.has_value());
        BOOST_TEST(first.n == 3u);
        p.send("xyz");
        p.wait_readable();
        outcome second;
        async_read_drained(p.ours, asio::buffer(buf), drain, [&](error_code ec, std::size_t n) {
            second.ec = ec;
            second.n = n;
        });
        // Drained, the read did not try a recv when it started: the bytes are still queued.
        // Not drained, Asio's early attempt took them.
        BOOST_TEST(queued_bytes(p.ours.native_handle()) == (drain ? 3u : 0u));
        p.io.restart();
        p.io.run_for(std::chrono::seconds(5));
        BOOST_REQUIRE(second.ec.has_value());
        BOOST_TEST(std::string(buf.data(), second.n) == "xyz");
    }
}

BOOST_AUTO_TEST_CASE(data_seen_by_the_reactor_between_two_reads_is_read)
{
    tcp_pair p;
    std::array<char, 64> buf;
    p.send("abc");
    p.wait_readable();
    take_events(p.io);                          // "abc"'s event taken: the read below finds the bytes at once
    auto first = read_once(p.io, p.ours, buf);  // a short read: the socket is marked drained
    BOOST_REQUIRE(first.ec.has_value());
    BOOST_TEST(first.n == 3u);
    // New data, and the reactor takes its epoll event while no read waits: that event must
    // undo the mark, or the next read would wait for an event already gone.
    p.send("xyz");
    p.wait_readable();
    take_events(p.io);
    auto second = read_once(p.io, p.ours, buf);
    BOOST_REQUIRE(second.ec.has_value());
    BOOST_TEST(!*second.ec);
    BOOST_TEST(std::string(buf.data(), second.n) == "xyz");
}

BOOST_AUTO_TEST_CASE(a_full_read_leaves_the_rest_to_the_next_read)
{
    tcp_pair p;
    p.send("0123456789");
    p.wait_readable();
    take_events(p.io);  // the arrival's epoll event is taken now: no later event will come
    std::array<char, 4> buf;
    std::string got;
    for (std::size_t want : {4u, 4u, 2u}) {
        auto out = read_once(p.io, p.ours, buf);  // a full read must not mark the socket drained
        BOOST_REQUIRE(out.ec.has_value());
        BOOST_TEST(!*out.ec);
        BOOST_TEST(out.n == want);
        got.append(buf.data(), out.n);
    }
    BOOST_TEST(got == "0123456789");
}

BOOST_AUTO_TEST_CASE(cancellation_close_and_end_of_file_end_a_waiting_read)
{
    std::array<char, 16> buf;
    {
        tcp_pair p;
        asio::cancellation_signal sig;
        outcome out;
        async_read_drained(p.ours, asio::buffer(buf), true,
                           asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, std::size_t n) {
                               out.ec = ec;
                               out.n = n;
                           }));
        p.io.poll();
        BOOST_TEST(!out.ec.has_value());
        sig.emit(asio::cancellation_type::terminal);
        p.io.restart();
        p.io.run_for(std::chrono::seconds(5));
        BOOST_REQUIRE(out.ec.has_value());
        BOOST_TEST((*out.ec == asio::error::operation_aborted));
        p.send("ok");  // the socket still reads after a cancelled read
        p.wait_readable();
        auto after = read_once(p.io, p.ours, buf);
        BOOST_REQUIRE(after.ec.has_value());
        BOOST_TEST(std::string(buf.data(), after.n) == "ok");
    }
    {
        tcp_pair p;
        outcome out;
        async_read_drained(p.ours, asio::buffer(buf), true, [&](error_code ec, std::size_t) { out.ec = ec; });
        p.io.poll();
        p.ours.close();
        p.io.restart();
        p.io.run_for(std::chrono::seconds(5));
        BOOST_REQUIRE(out.ec.has_value());
        BOOST_TEST((*out.ec == asio::error::operation_aborted));
    }
    {
        tcp_pair p;
        p.theirs.close();
        auto out = read_once(p.io, p.ours, buf);
        BOOST_REQUIRE(out.ec.has_value());
        BOOST_TEST((*out.ec == asio::error::eof));
    }
}

BOOST_AUTO_TEST_CASE(unix_sockets_and_the_handlers_allocator)
{
    asio::io_context io;
    asio::local::stream_protocol::socket a(io), b(io);
    asio::local::connect_pair(a, b);
    dlock::detail::op_slot slot;
    std::array<char, 16> buf;
    outcome out;
    bool busy_in_handler = true;
    async_read_drained(
        a, asio::buffer(buf), true,
        asio::bind_allocator(dlock::detail::slot_allocator<void>(slot), [&](error_code ec, std::size_t n) {
            out.ec = ec;
            out.n = n;
            busy_in_handler = slot.busy();
        }));
    BOOST_TEST(slot.busy());  // the waiting operation lives in the handler's block
    asio::write(b, asio::buffer(std::string("unix")));
    io.run_for(std::chrono::seconds(5));
    BOOST_REQUIRE(out.ec.has_value());
    BOOST_TEST(!busy_in_handler);  // given back before the handler ran
    BOOST_TEST(std::string(buf.data(), out.n) == "unix");
}

BOOST_AUTO_TEST_SUITE_END()
