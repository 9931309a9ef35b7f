// SPDX-License-Identifier: BSL-1.0
// Sentinel discovery without a sentinel (src/redis/sentinel_query.*): the bytes one sentinel
// is sent, each state x reply of its exchange, and the walk over several sentinels; then
// the driver against fake sentinels on loopback.
#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>

#include "redis/sentinel.hpp"
#include "redis/sentinel_query.hpp"
#include "unit/print.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

using boost::system::error_code;
using dlock::redis::reply;
using dlock::redis::reply_type;
using dlock::redis::sentinel_config;
using dlock::redis::sentinel_node;
using dlock::redis::detail::sentinel_query;
using dlock::redis::detail::sentinel_walk;
using st = sentinel_query::state;

namespace dlock::redis::detail {
inline std::ostream& boost_test_print_type(std::ostream& os, sentinel_query::state s)
{
    return os << static_cast<int>(s);
}
}  // namespace dlock::redis::detail

namespace {

reply status(std::string s)
{
    return reply{reply_type::status, 0, std::move(s), {}};
}
reply err(std::string s)
{
    return reply{reply_type::error, 0, std::move(s), {}};
}
reply str(std::string s)
{
    return reply{reply_type::string, 0, std::move(s), {}};
}
reply num(long long v)
{
    return reply{reply_type::integer, v, {}, {}};
}
reply nil()
{
    return reply{};
}
reply arr(std::vector<reply> e)
{
    return reply{reply_type::array, 0, {}, std::move(e)};
}
reply addr(std::string host, std::string port)
{
    return arr({str(std::move(host)), str(std::move(port))});
}

const std::string question = "*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$8\r\nmymaster\r\n";

sentinel_config no_auth()
{
    sentinel_config c;
    c.master_name = "mymaster";
    c.nodes = {{"a", 26379}, {"b", 26380}, {"c", 26381}};
    return c;
}
sentinel_config with_auth()
{
    auto c = no_auth();
    c.password = "pw";
    return c;
}
sentinel_config with_user()
{
    auto c = with_auth();
    c.username = "user";
    return c;
}

// A query that has passed AUTH (when configured) and waits for the answer.
sentinel_query awaiting_answer(const sentinel_config& c)
{
    sentinel_query q(c);
    if (!c.password.empty())
        BOOST_TEST_REQUIRE((q.feed(status("OK")) == st::pending));
    return q;
}

void check(const sentinel_query& q, st s, error_code ec, const std::string& said)
{
    BOOST_TEST((q.current() == s), "state " << static_cast<int>(q.current()) << " != " << static_cast<int>(s));
    BOOST_TEST(q.done() == (s != st::pending));
    BOOST_TEST(q.error() == ec, q.error().message() << " != " << ec.message());
    BOOST_TEST(q.said() == said);
}

const error_code none{};
const error_code timeout = dlock::error::timeout;
const std::string no_master = "does not know master 'mymaster'";
const std::string unexpected = "gave an unexpected reply";
const std::string closed_text = "closed the connection";

}  // namespace

BOOST_AUTO_TEST_SUITE(sentinel_query_machine)

BOOST_AUTO_TEST_CASE(request_bytes_without_auth_with_auth_and_with_username)
{
    BOOST_TEST(sentinel_query(no_auth()).request() == question);
    BOOST_TEST(sentinel_query(with_auth()).request() == "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n" + question);
    BOOST_TEST(sentinel_query(with_user()).request() == "*3\r\n$4\r\nAUTH\r\n$4\r\nuser\r\n$2\r\npw\r\n" + question);
    // A username without a password sends no AUTH (as the master's own handshake).
    auto user_only = no_auth();
    user_only.username = "user";
    BOOST_TEST(sentinel_query(user_only).request() == question);
    BOOST_TEST((sentinel_query(no_auth()).current() == st::pending));
}

// State "awaiting AUTH's reply" x each event.
BOOST_AUTO_TEST_CASE(awaiting_auth)
{
    for (const auto& c : {with_auth(), with_user()}) {
        {
            sentinel_query q(c);
            BOOST_TEST((q.feed(status("OK")) == st::pending));
            check(q, st::pending, none, "");
        }
        {
            sentinel_query q(c);
            BOOST_TEST((q.feed(err("WRONGPASS invalid username-password pair")) == st::auth_refused));
            check(q, st::auth_refused, dlock::error::auth_failed, "WRONGPASS invalid username-password pair");
        }
        {
            // Any reply but an error accepts AUTH; the answer to the question comes next.
            sentinel_query q(c);
            BOOST_TEST((q.feed(nil()) == st::pending));
            BOOST_TEST((q.feed(addr("10.0.0.1", "6379")) == st::found));
        }
        {
            // An address as AUTH's reply is not taken for the answer.
            sentinel_query q(c);
            BOOST_TEST((q.feed(addr("10.0.0.1", "6379")) == st::pending));
            BOOST_TEST(q.host().empty());
        }
        {
            sentinel_query q(c);
            q.closed();
            check(q, st::closed, dlock::error::connect_failed, closed_text);
        }
        {
            sentinel_query q(c);
            q.fail(timeout);
            check(q, st::failed, timeout, "");
        }
    }
}

// State "awaiting the answer" (no AUTH, or after +OK to AUTH) x each event.
BOOST_AUTO_TEST_CASE(awaiting_the_answer)
{
    for (const auto& c : {no_auth(), with_auth(), with_user()}) {
        {
            auto q = awaiting_answer(c);
            BOOST_TEST((q.feed(addr("10.0.0.7", "6380")) == st::found));
            check(q, st::found, none, "");
            BOOST_TEST(q.host() == "10.0.0.7");
            BOOST_TEST(q.port() == 6380);
        }
        {
            auto q = awaiting_answer(c);
            BOOST_TEST((q.feed(addr("::1", "65535")) == st::found));
            BOOST_TEST(q.port() == 65535);
        }
        {
            // An error to the question, NOAUTH included, is "could not find it", not an AUTH refusal.
            auto q = awaiting_answer(c);
            BOOST_TEST((q.feed(err("NOAUTH Authentication required.")) == st::refused));
            check(q, st::refused, dlock::error::resolve_failed, "NOAUTH Authentication required.");
        }
        {
            auto q = awaiting_answer(c);
            BOOST_TEST((q.feed(err("ERR unknown command 'SENTINEL'")) == st::refused));
            check(q, st::refused, dlock::error::resolve_failed, "ERR unknown command 'SENTINEL'");
        }
        {
            auto q = awaiting_answer(c);
            BOOST_TEST((q.feed(nil()) == st::unknown_master));
            check(q, st::unknown_master, dlock::error::resolve_failed, no_master);
        }
        {
            auto q = awaiting_answer(c);
            q.closed();
            check(q, st::closed, dlock::error::connect_failed, closed_text);
        }
        {
            auto q = awaiting_answer(c);
            q.fail(dlock::error::protocol_error);
            check(q, st::failed, dlock::error::protocol_error, "");
        }
    }
}

BOOST_AUTO_TEST_CASE(answers_of_the_wrong_shape_or_with_a_bad_port)
{
    const std::vector<std::pair<const char*, reply>> bad = {
        {"status", status("OK")},
        {"string", str("10.0.0.1:6379")},
        {"integer", num(6379)},
        {"empty array", arr({})},
        {"one element", arr({str("10.0.0.1")})},
        {"three elements", arr({str("10.0.0.1"), str("6379"), str("x")})},
        {"port as integer", arr({str("10.0.0.1"), num(6379)})},
        {"empty port", addr("10.0.0.1", "")},
        {"port not a number", addr("10.0.0.1", "http")},
        {"negative port", addr("10.0.0.1", "-1")},
        {"port 0", addr("10.0.0.1", "0")},
        {"port above 65535", addr("10.0.0.1", "65536")},
        {"nil port", arr({str("10.0.0.1"), nil()})},
        {"port with trailing junk", addr("10.0.0.1", "6379x")},
        {"nil host", arr({nil(), str("6379")})},
        {"empty host", addr("", "6379")},
        {"host as integer", arr({num(1), str("6379")})},
    };
    for (const auto& c : {no_auth(), with_auth()}) {
        for (const auto& [what, r] : bad) {
            BOOST_TEST_CONTEXT(what << (c.password.empty() ? "" : " after AUTH"))
            {
                auto q = awaiting_answer(c);
                BOOST_TEST((q.feed(r) == st::malformed));
                check(q, st::malformed, dlock::error::protocol_error, unexpected);
                BOOST_TEST(q.host().empty());
                BOOST_TEST(q.port() == 0);
            }
        }
    }
}

// Every final state x every event: replies and a closed connection change nothing; fail()
// (the timeout that cancelled the read) overrides all but an address.
BOOST_AUTO_TEST_CASE(final_states_stay)
{
    struct final_state {
        st s;
        error_code ec;
        std::string said;
        std::vector<reply> script;  // with AUTH configured
    };
    const std::vector<final_state> finals = {
        {st::found, none, "", {status("OK"), addr("10.0.0.1", "6379")}},
        {st::auth_refused, dlock::error::auth_failed, "WRONGPASS x", {err("WRONGPASS x")}},
        {st::refused, dlock::error::resolve_failed, "ERR y", {status("OK"), err("ERR y")}},
        {st::unknown_master, dlock::error::resolve_failed, no_master, {status("OK"), nil()}},
        {st::malformed, dlock::error::protocol_error, unexpected, {status("OK"), num(1)}},
    };
    for (const auto& f : finals) {
        BOOST_TEST_CONTEXT("state " << static_cast<int>(f.s))
        {
            auto make = [&] {
                sentinel_query q(with_auth());
                for (const auto& r : f.script)
                    q.feed(r);
                check(q, f.s, f.ec, f.said);
                return q;
            };
            for (const auto& r : {status("OK"), err("ERR late"), nil(), addr("10.9.9.9", "1"), num(3)}) {
                auto q = make();
                BOOST_TEST((q.feed(r) == f.s));
                check(q, f.s, f.ec, f.said);
                if (f.s == st::found)
                    BOOST_TEST(q.host() == "10.0.0.1");
            }
            {
                auto q = make();
                q.closed();
                check(q, f.s, f.ec, f.said);
            }
            {
                auto q = make();
                q.fail(timeout);
                if (f.s == st::found)
                    check(q, st::found, none, "");
                else
                    check(q, st::failed, timeout, "");
            }
        }
    }
    // closed then the timeout: the timeout is what is reported.
    sentinel_query q(no_auth());
    q.closed();
    q.fail(timeout);
    check(q, st::failed, timeout, "");
    BOOST_TEST((q.feed(addr("10.0.0.1", "6379")) == st::failed));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sentinel_walk_machine)

namespace {

sentinel_query answered(const sentinel_config& c, std::string host, std::string port)
{
    sentinel_query q(c);
    q.feed(addr(std::move(host), std::move(port)));
    return q;
}
sentinel_query said(const sentinel_config& c, std::vector<reply> replies)
{
    sentinel_query q(c);
    for (const auto& r : replies)
        q.feed(r);
    return q;
}
sentinel_query failed(const sentinel_config& c, error_code ec)
{
    sentinel_query q(c);
    q.fail(ec);
    return q;
}
std::vector<std::string> order(const sentinel_walk& w)
{
    std::vector<std::string> v;
    for (const auto& n : w.nodes())
        v.push_back(n.host + ":" + std::to_string(n.port));
    return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_sentinels)
{
    sentinel_config c;
    c.master_name = "mymaster";
    sentinel_walk w(c);
    BOOST_TEST(w.done());
    BOOST_TEST(w.next() == nullptr);
    BOOST_TEST(w.result() == dlock::error::resolve_failed);
    BOOST_TEST(w.message() == "no sentinels configured for master 'mymaster'");
}

BOOST_AUTO_TEST_CASE(the_first_answers)
{
    const auto c = no_auth();
    sentinel_walk w(c);
    BOOST_TEST_REQUIRE(w.next() != nullptr);
    BOOST_TEST(w.next()->host == "a");
    BOOST_TEST(!w.done());
    w.record(answered(c, "10.0.0.1", "6379"));
    BOOST_TEST(w.done());
    BOOST_TEST(w.next() == nullptr);
    BOOST_TEST(!w.result());
    BOOST_TEST(w.host() == "10.0.0.1");
    BOOST_TEST(w.port() == 6379);
    BOOST_TEST(w.message().empty());
    BOOST_TEST(order(w) == (std::vector<std::string>{"a:26379", "b:26380", "c:26381"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_first_fails_the_second_answers_and_moves_to_the_front)
{
    const auto c = no_auth();
    sentinel_walk w(c);
    w.record(said(c, {nil()}));
    BOOST_TEST(!w.done());
    BOOST_TEST_REQUIRE(w.next() != nullptr);
    BOOST_TEST(w.next()->host == "b");
    BOOST_TEST(w.next()->port == 26380);
    w.record(answered(c, "10.0.0.2", "6390"));
    BOOST_TEST(w.done());
    BOOST_TEST(!w.result());
    BOOST_TEST(w.host() == "10.0.0.2");
    BOOST_TEST(w.port() == 6390);
    // What the first said stays in the message (the connection's last_server_message()).
    BOOST_TEST(w.message() == "sentinel a:26379: " + no_master);
    BOOST_TEST(order(w) == (std::vector<std::string>{"b:26380", "a:26379", "c:26381"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_last_answers_and_the_others_keep_their_order)
{
    const auto c = no_auth();
    sentinel_walk w(c);
    w.record(failed(c, dlock::error::connect_failed));
    w.record(failed(c, timeout));
    BOOST_TEST(w.next()->host == "c");
    w.record(answered(c, "h", "1"));
    BOOST_TEST(!w.result());
    BOOST_TEST(order(w) == (std::vector<std::string>{"c:26381", "a:26379", "b:26380"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(all_fail_and_the_message_lists_each)
{
    const auto c = with_auth();
    sentinel_walk w(c);
    w.record(said(c, {status("OK"), nil()}));
    w.record(failed(c, timeout));
    sentinel_query closed(c);
    closed.closed();
    w.record(closed);
    BOOST_TEST(w.done());
    BOOST_TEST(w.next() == nullptr);
    BOOST_TEST(w.result() == dlock::error::resolve_failed);
    BOOST_TEST(w.message() == "sentinel a:26379: " + no_master + "; sentinel b:26380: " + error_code(timeout).message() +
                                  "; sentinel c:26381: " + closed_text);
    BOOST_TEST(w.host().empty());
    // Nobody answered: the order is kept.
    BOOST_TEST(order(w) == (std::vector<std::string>{"a:26379", "b:26380", "c:26381"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_result_is_auth_failed_only_when_the_last_sentinel_refused_our_auth)
{
    const auto c = with_user();
    {
        sentinel_walk w(c);
        w.record(failed(c, timeout));
        w.record(said(c, {status("OK"), err("ERR boom")}));
        w.record(said(c, {err("WRONGPASS nope")}));
        BOOST_TEST(w.result() == dlock::error::auth_failed);
        BOOST_TEST(w.message() == "sentinel a:26379: " + error_code(timeout).message() +
                                      "; sentinel b:26380: ERR boom; sentinel c:26381: WRONGPASS nope");
    }
    {
        sentinel_walk w(c);
        w.record(said(c, {err("WRONGPASS nope")}));
        w.record(said(c, {err("WRONGPASS nope")}));
        w.record(said(c, {status("OK"), arr({})}));
        BOOST_TEST(w.result() == dlock::error::resolve_failed);
        BOOST_TEST(w.message() == "sentinel a:26379: WRONGPASS nope; sentinel b:26380: WRONGPASS nope; "
                                  "sentinel c:26381: " +
                                      unexpected);
    }
    {
        // A lone sentinel that refuses AUTH.
        sentinel_config one = c;
        one.nodes.resize(1);
        sentinel_walk w(one);
        w.record(said(one, {err("WRONGPASS nope")}));
        BOOST_TEST(w.result() == dlock::error::auth_failed);
    }
}

BOOST_AUTO_TEST_CASE(after_the_walk_nothing_changes_and_an_undecided_query_is_a_protocol_error)
{
    const auto c = no_auth();
    sentinel_walk w(c);
    w.record(sentinel_query(c));  // the driver never does this: counted as a bad exchange
    BOOST_TEST(w.message() == "sentinel a:26379: " + error_code(dlock::error::protocol_error).message());
    w.record(answered(c, "10.0.0.3", "7000"));
    w.record(answered(c, "10.0.0.4", "7001"));
    w.record(failed(c, timeout));
    BOOST_TEST(!w.result());
    BOOST_TEST(w.host() == "10.0.0.3");
    BOOST_TEST(w.port() == 7000);
    BOOST_TEST(order(w) == (std::vector<std::string>{"b:26380", "a:26379", "c:26381"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

// The driver (sentinel.cpp) against fake sentinels on loopback: bytes in any split, a
// refused port, a sentinel that hangs up or never answers.
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

enum class then { hang_up, stay_silent };

// Accepts one connection, reads the question, writes `answer` a byte at a time, then hangs
// up or keeps the socket open until the test ends.
struct fake_sentinel {
    tcp::acceptor acc;
    std::shared_ptr<tcp::socket> kept;

    fake_sentinel(asio::io_context& io, std::string answer, std::size_t question_size, then after)
        : acc(io, {asio::ip::make_address("127.0.0.1"), 0})
    {
        asio::co_spawn(io, serve(std::move(answer), question_size, after), asio::detached);
    }
    std::uint16_t port() const { return acc.local_endpoint().port(); }

    asio::awaitable<void> serve(std::string answer, std::size_t question_size, then after)
    {
        auto s = std::make_shared<tcp::socket>(co_await acc.async_accept(asio::use_awaitable));
        std::string got(question_size, '\0');
        co_await asio::async_read(*s, asio::buffer(got), asio::use_awaitable);
        for (char ch : answer)
            co_await asio::async_write(*s, asio::buffer(&ch, 1), asio::use_awaitable);
        if (after == then::stay_silent)
            kept = s;
    }
};

struct discovery {
    boost::system::error_code ec;
    std::string message;
    dlock::redis::config cfg;
};

discovery discover(asio::io_context& io, dlock::redis::config cfg)
{
    discovery d;
    d.cfg = std::move(cfg);
    bool finished = false;
    asio::co_spawn(io, dlock::redis::detail::discover_master(io.get_executor(), d.cfg, d.message),
                   [&](std::exception_ptr e, boost::system::error_code ec) {
                       BOOST_TEST(!e);
                       d.ec = ec;
                       finished = true;
                   });
    io.run_for(std::chrono::seconds(10));
    BOOST_TEST_REQUIRE(finished);
    return d;
}

dlock::redis::config sentinels(std::vector<std::uint16_t> ports, std::string password = {})
{
    dlock::redis::config c;
    c.sentinel.master_name = "mymaster";
    c.sentinel.password = std::move(password);
    for (auto p : ports)
        c.sentinel.nodes.push_back({"127.0.0.1", p});
    return c;
}

std::uint16_t refused_port(asio::io_context& io)
{
    tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    return a.local_endpoint().port();  // closed when `a` goes: connecting there is refused
}

std::string node(std::uint16_t port)
{
    return "sentinel 127.0.0.1:" + std::to_string(port) + ": ";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sentinel_discovery_driver)

BOOST_AUTO_TEST_CASE(a_refused_sentinel_then_one_that_answers_after_auth_byte_by_byte)
{
    asio::io_context io;
    auto cfg = sentinels({}, "pw");
    const auto q = sentinel_query(cfg.sentinel).request().size();
    fake_sentinel good(io, "+OK\r\n*2\r\n$8\r\n10.0.0.9\r\n$4\r\n6390\r\n", q, then::hang_up);
    const auto dead = refused_port(io);
    cfg.sentinel.nodes = {{"127.0.0.1", dead}, {"127.0.0.1", good.port()}};
    auto d = discover(io, cfg);
    BOOST_TEST(!d.ec, d.ec.message());
    BOOST_TEST(d.cfg.host == "10.0.0.9");
    BOOST_TEST(d.cfg.port == 6390);
    BOOST_TEST(d.cfg.sentinel.nodes[0].port == good.port());
    BOOST_TEST(d.cfg.sentinel.nodes[1].port == dead);
    BOOST_TEST(d.message == node(dead) + boost::system::error_code(dlock::error::connect_failed).message());
}

BOOST_AUTO_TEST_CASE(auth_refused_hang_up_bad_resp_and_silence_each_named)
{
    asio::io_context io;
    auto cfg = sentinels({}, "pw");
    cfg.connect_timeout = std::chrono::milliseconds(300);
    const auto q = sentinel_query(cfg.sentinel).request().size();
    fake_sentinel refusing(io, "-WRONGPASS no\r\n", q, then::stay_silent);
    fake_sentinel hanging_up(io, "+OK\r\n", q, then::hang_up);
    fake_sentinel garbled(io, "+OK\r\n?what\r\n", q, then::stay_silent);
    fake_sentinel silent(io, "+OK\r\n", q, then::stay_silent);
    cfg.sentinel.nodes = {{"127.0.0.1", refusing.port()},
                          {"127.0.0.1", hanging_up.port()},
                          {"127.0.0.1", garbled.port()},
                          {"127.0.0.1", silent.port()}};
    auto d = discover(io, cfg);
    BOOST_TEST(d.ec == dlock::error::resolve_failed);
    // Silence past connect_timeout is a timeout, not "closed the connection".
    BOOST_TEST(d.message == node(refusing.port()) + "WRONGPASS no; " + node(hanging_up.port()) + closed_text + "; " +
                                node(garbled.port()) +
                                boost::system::error_code(dlock::error::protocol_error).message() + "; " +
                                node(silent.port()) + boost::system::error_code(timeout).message());
    BOOST_TEST(d.cfg.sentinel.nodes[0].port == refusing.port());
}

BOOST_AUTO_TEST_CASE(the_last_sentinel_refusing_auth_is_auth_failed)
{
    asio::io_context io;
    auto cfg = sentinels({}, "pw");
    const auto q = sentinel_query(cfg.sentinel).request().size();
    fake_sentinel unknown(io, "+OK\r\n*-1\r\n", q, then::hang_up);
    fake_sentinel refusing(io, "-WRONGPASS no\r\n", q, then::hang_up);
    cfg.sentinel.nodes = {{"127.0.0.1", unknown.port()}, {"127.0.0.1", refusing.port()}};
    auto d = discover(io, cfg);
    BOOST_TEST(d.ec == dlock::error::auth_failed);
    BOOST_TEST(d.message == node(unknown.port()) + no_master + "; " + node(refusing.port()) + "WRONGPASS no");
}

BOOST_AUTO_TEST_SUITE_END()
