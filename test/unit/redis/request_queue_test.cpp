// SPDX-License-Identifier: BSL-1.0
// The sans-io pipelining queue: FIFO matching, batching, cancellation, connection loss.
#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/redis/request.hpp>

#include "redis/request_queue.hpp"
#include "unit/print.hpp"

#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

using boost::system::error_code;
using dlock::redis::reply;
using dlock::redis::reply_type;
using dlock::redis::request;
using dlock::redis::detail::pending;
using dlock::redis::detail::pending_state;
using dlock::redis::detail::request_queue;

namespace {

std::shared_ptr<pending> make(const request& req)
{
    auto p = std::make_shared<pending>();
    p->payload = req.payload();
    p->expected = req.size();
    return p;
}

std::shared_ptr<pending> make_echo(const std::string& value)
{
    request req;
    req.push("ECHO", value);
    return make(req);
}

// A fire-and-forget command (subscriber mode): no reply is matched to it.
std::shared_ptr<pending> make_send(const std::string& channel)
{
    request req;
    req.push("SUBSCRIBE", channel);
    auto p = make(req);
    p->expected = 0;
    return p;
}

reply bulk(std::string s)
{
    return {reply_type::string, 0, std::move(s), {}};
}
reply integer(long long v)
{
    return {reply_type::integer, v, {}, {}};
}

// Feeds one reply; returns the request it completed (nullptr if none) and requires no error.
std::shared_ptr<pending> feed(request_queue& q, reply r)
{
    error_code ec;
    auto done = q.on_reply(std::move(r), ec);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    return done;
}

std::string echo_payload(const std::string& value)
{
    request req;
    req.push("ECHO", value);
    return req.payload();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(request_queue_suite)

BOOST_AUTO_TEST_CASE(empty_queue)
{
    request_queue q;
    BOOST_TEST(!q.has_queued());
    BOOST_TEST(q.queued_count() == 0u);
    BOOST_TEST(q.written_count() == 0u);
    BOOST_TEST(q.take_batch().empty());
    BOOST_TEST(q.take_written().empty());
    BOOST_TEST(q.take_all().empty());
}

BOOST_AUTO_TEST_CASE(fifo_matching)
{
    request_queue q;
    std::vector<std::shared_ptr<pending>> ps;
    for (int i = 0; i < 5; ++i) {
        ps.push_back(make_echo("v" + std::to_string(i)));
        q.push(ps.back());
    }
    BOOST_TEST(q.queued_count() == 5u);
    q.take_batch();
    BOOST_TEST(q.queued_count() == 0u);
    BOOST_TEST(q.written_count() == 5u);
    for (int i = 0; i < 5; ++i) {
        auto done = feed(q, bulk("v" + std::to_string(i)));
        BOOST_TEST_REQUIRE(done.get() == ps[static_cast<std::size_t>(i)].get());
        BOOST_TEST((done->state == pending_state::done));
        BOOST_TEST_REQUIRE(done->replies.size() == 1u);
        BOOST_TEST(done->replies[0].str == "v" + std::to_string(i));
    }
    BOOST_TEST(q.written_count() == 0u);
}

BOOST_AUTO_TEST_CASE(batch_concatenation)
{
    request_queue q;
    auto a = make_echo("a");
    auto b = make_echo("bb");
    auto c = make_echo("ccc");
    q.push(a);
    q.push(b);
    q.push(c);
    BOOST_TEST(q.has_queued());
    std::string batch = q.take_batch();
    BOOST_TEST(batch == echo_payload("a") + echo_payload("bb") + echo_payload("ccc"));
    for (auto& p : {a, b, c}) {
        BOOST_TEST((p->state == pending_state::written));
        BOOST_TEST(p->payload.empty());  // the bytes live in the batch only
    }
    BOOST_TEST(!q.has_queued());

    // Requests pushed while a batch is on the wire form the next batch, written after it.
    auto d = make_echo("d");
    q.push(d);
    BOOST_TEST(q.take_batch() == echo_payload("d"));
    BOOST_TEST(q.written_count() == 4u);
    BOOST_TEST(feed(q, bulk("a")) == a);
    BOOST_TEST(feed(q, bulk("bb")) == b);
    BOOST_TEST(feed(q, bulk("ccc")) == c);
    BOOST_TEST(feed(q, bulk("d")) == d);
}

BOOST_AUTO_TEST_CASE(single_request_batch)
{
    request_queue q;
    auto a = make_echo("only");
    q.push(a);
    BOOST_TEST(q.take_batch() == echo_payload("only"));
    BOOST_TEST(q.written_count() == 1u);
}

// The writer's buffer is appended to (it is reused from write to write), and a request that
// may be sent again (a script call, as EVAL after NOSCRIPT) keeps its bytes while on the wire.
BOOST_AUTO_TEST_CASE(batch_appends_and_keeps_payloads_asked_for)
{
    request_queue q;
    auto a = make_echo("a");
    auto b = make_echo("bb");
    b->keep_payload = true;
    q.push(a);
    q.push(b);
    std::string out = "left";
    q.take_batch(out);
    BOOST_TEST(out == "left" + echo_payload("a") + echo_payload("bb"));
    BOOST_TEST(a->payload.empty());
    BOOST_TEST(b->payload == echo_payload("bb"));
    BOOST_TEST(q.written_count() == 2u);
}

BOOST_AUTO_TEST_CASE(multi_command_requests)
{
    request_queue q;
    request r1;
    r1.push("SET", "k", "v").push("INCR", "n").push("GET", "k");
    request r2;
    r2.push("PING");
    auto a = make(r1);
    auto b = make(r2);
    BOOST_TEST(a->expected == 3u);
    q.push(a);
    q.push(b);
    q.take_batch();
    BOOST_TEST(feed(q, reply{reply_type::status, 0, "OK", {}}) == nullptr);
    BOOST_TEST(feed(q, integer(1)) == nullptr);
    BOOST_TEST(a->received == 2u);
    auto done = feed(q, bulk("v"));
    BOOST_TEST_REQUIRE(done == a);
    BOOST_TEST_REQUIRE(a->replies.size() == 3u);
    BOOST_TEST(a->replies[0].str == "OK");
    BOOST_TEST(a->replies[1].integer == 1);
    BOOST_TEST(a->replies[2].str == "v");
    BOOST_TEST(feed(q, reply{reply_type::status, 0, "PONG", {}}) == b);
    BOOST_TEST(b->replies.size() == 1u);
}

BOOST_AUTO_TEST_CASE(error_reply_is_a_reply)
{
    // An error reply completes its command like any other: the queue never desyncs on it.
    request_queue q;
    request r;
    r.push("INCR", "str").push("PING");
    auto a = make(r);
    auto b = make_echo("next");
    q.push(a);
    q.push(b);
    q.take_batch();
    BOOST_TEST(feed(q, reply{reply_type::error, 0, "ERR not an integer", {}}) == nullptr);
    BOOST_TEST(feed(q, reply{reply_type::status, 0, "PONG", {}}) == a);
    BOOST_TEST(a->replies[0].is_error());
    BOOST_TEST(feed(q, bulk("next")) == b);
}

BOOST_AUTO_TEST_CASE(cancel_queued_removes_it)
{
    request_queue q;
    auto a = make_echo("a");
    auto b = make_echo("b");
    auto c = make_echo("c");
    q.push(a);
    q.push(b);
    q.push(c);
    BOOST_TEST(q.cancel(*b));  // nothing reached the server
    BOOST_TEST((b->state == pending_state::done));
    BOOST_TEST(q.queued_count() == 2u);
    BOOST_TEST(q.take_batch() == echo_payload("a") + echo_payload("c"));
    BOOST_TEST(feed(q, bulk("a")) == a);
    BOOST_TEST(feed(q, bulk("c")) == c);
    BOOST_TEST(q.written_count() == 0u);
}

BOOST_AUTO_TEST_CASE(cancel_written_drops_its_replies)
{
    request_queue q;
    request multi;
    multi.push("ECHO", "x1").push("ECHO", "x2");
    auto a = make_echo("a");
    auto b = make(multi);
    auto c = make_echo("c");
    q.push(a);
    q.push(b);
    q.push(c);
    q.take_batch();

    BOOST_TEST(!q.cancel(*b));  // on the wire: cannot be unsent
    BOOST_TEST((b->state == pending_state::abandoned));
    BOOST_TEST(q.written_count() == 3u);

    BOOST_TEST(feed(q, bulk("a")) == a);
    // b's two replies are consumed and dropped; the queue says when b is finished so the
    // I/O layer can forget it, but its state tells it not to complete a handler.
    BOOST_TEST(feed(q, bulk("x1")) == nullptr);
    auto done = feed(q, bulk("x2"));
    BOOST_TEST(done == b);
    BOOST_TEST((done->state == pending_state::abandoned));
    BOOST_TEST(done->replies.empty());
    // c still gets exactly its own reply: the stream stayed in sync.
    done = feed(q, bulk("c"));
    BOOST_TEST_REQUIRE(done == c);
    BOOST_TEST((c->state == pending_state::done));
    BOOST_TEST_REQUIRE(c->replies.size() == 1u);
    BOOST_TEST(c->replies[0].str == "c");
}

BOOST_AUTO_TEST_CASE(cancel_after_partial_replies)
{
    // Cancelled after the first of its two replies arrived: the rest is still skipped.
    request_queue q;
    request multi;
    multi.push("ECHO", "x1").push("ECHO", "x2");
    auto a = make(multi);
    auto b = make_echo("b");
    q.push(a);
    q.push(b);
    q.take_batch();
    BOOST_TEST(feed(q, bulk("x1")) == nullptr);
    BOOST_TEST(!q.cancel(*a));
    BOOST_TEST(a->replies.empty());
    BOOST_TEST(feed(q, bulk("x2")) == a);
    BOOST_TEST(a->replies.empty());
    BOOST_TEST(feed(q, bulk("b")) == b);
    BOOST_TEST(b->replies[0].str == "b");
}

BOOST_AUTO_TEST_CASE(cancel_unknown_or_twice)
{
    request_queue q;
    auto a = make_echo("a");
    auto stranger = make_echo("s");
    q.push(a);
    BOOST_TEST(!q.cancel(*stranger));
    BOOST_TEST(q.queued_count() == 1u);
    BOOST_TEST(q.cancel(*a));
    BOOST_TEST(!q.cancel(*a));  // already gone
    BOOST_TEST(q.queued_count() == 0u);
    BOOST_TEST(q.take_batch().empty());
}

BOOST_AUTO_TEST_CASE(reply_with_nothing_pending)
{
    request_queue q;
    error_code ec;
    BOOST_TEST(q.on_reply(bulk("stray"), ec) == nullptr);
    BOOST_TEST(ec == dlock::error::protocol_error);

    // Also after every written request has had its replies, and with only queued ones.
    auto a = make_echo("a");
    q.push(a);
    q.take_batch();
    BOOST_TEST(feed(q, bulk("a")) == a);
    q.push(make_echo("queued"));
    ec = {};
    BOOST_TEST(q.on_reply(bulk("extra"), ec) == nullptr);
    BOOST_TEST(ec == dlock::error::protocol_error);
    BOOST_TEST(q.queued_count() == 1u);
}

BOOST_AUTO_TEST_CASE(fire_and_forget_commands)
{
    // Subscriber mode: sends expect no reply and never sit in the written list.
    request_queue q;
    auto s = make_send("ch");
    q.push(s);
    std::string batch = q.take_batch();
    BOOST_TEST(!batch.empty());
    BOOST_TEST((s->state == pending_state::done));
    BOOST_TEST(q.written_count() == 0u);
    error_code ec;
    q.on_reply(bulk("subscribe"), ec);
    BOOST_TEST(ec == dlock::error::protocol_error);
}

BOOST_AUTO_TEST_CASE(push_front_goes_first)
{
    request_queue q;
    auto a = make_echo("a");
    auto resub = make_echo("first");
    q.push(a);
    q.push_front(resub);
    BOOST_TEST(q.take_batch() == echo_payload("first") + echo_payload("a"));
    BOOST_TEST(feed(q, bulk("first")) == resub);
    BOOST_TEST(feed(q, bulk("a")) == a);
}

BOOST_AUTO_TEST_CASE(take_written_keeps_queued)
{
    request_queue q;
    auto a = make_echo("a");
    auto b = make_echo("b");
    q.push(a);
    q.push(b);
    q.take_batch();
    BOOST_TEST(feed(q, bulk("a")) == a);
    auto c = make_echo("c");
    q.push(c);  // not yet written when the connection drops

    auto lost = q.take_written();
    BOOST_TEST_REQUIRE(lost.size() == 1u);
    BOOST_TEST(lost[0] == b);
    BOOST_TEST(q.written_count() == 0u);
    BOOST_TEST(q.queued_count() == 1u);

    // The next connection writes c; its reply matches c, not the lost b.
    BOOST_TEST(q.take_batch() == echo_payload("c"));
    BOOST_TEST(feed(q, bulk("c")) == c);
}

BOOST_AUTO_TEST_CASE(take_written_includes_abandoned)
{
    // The I/O layer skips abandoned requests when failing them (they have no handler).
    request_queue q;
    auto a = make_echo("a");
    auto b = make_echo("b");
    q.push(a);
    q.push(b);
    q.take_batch();
    q.cancel(*a);
    auto lost = q.take_written();
    BOOST_TEST_REQUIRE(lost.size() == 2u);
    BOOST_TEST((lost[0]->state == pending_state::abandoned));
    BOOST_TEST((lost[1]->state == pending_state::written));
}

BOOST_AUTO_TEST_CASE(take_all_written_then_queued)
{
    request_queue q;
    auto a = make_echo("a");
    auto b = make_echo("b");
    q.push(a);
    q.take_batch();
    q.push(b);
    auto all = q.take_all();
    BOOST_TEST_REQUIRE(all.size() == 2u);
    BOOST_TEST(all[0] == a);
    BOOST_TEST(all[1] == b);
    BOOST_TEST(q.written_count() == 0u);
    BOOST_TEST(q.queued_count() == 0u);
    BOOST_TEST(!q.has_queued());
    error_code ec;
    q.on_reply(bulk("late"), ec);
    BOOST_TEST(ec == dlock::error::protocol_error);
}

BOOST_AUTO_TEST_CASE(interleaved_stress)
{
    // Many rounds of push / batch / reply / cancel, checked against a simple model.
    request_queue q;
    std::vector<std::shared_ptr<pending>> wire;  // written, in order, with cancel flags
    std::vector<std::shared_ptr<pending>> queued;
    int next = 0;
    unsigned seed = 12345;
    auto rnd = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 16) % 100; };
    for (int round = 0; round < 2000; ++round) {
        auto pick = rnd();
        if (pick < 40) {
            auto p = make_echo(std::to_string(next++));
            q.push(p);
            queued.push_back(p);
        } else if (pick < 55) {
            q.take_batch();
            wire.insert(wire.end(), queued.begin(), queued.end());
            queued.clear();
        } else if (pick < 65 && !queued.empty()) {
            auto victim = queued[rnd() % queued.size()];
            BOOST_TEST_REQUIRE(q.cancel(*victim));
            std::erase(queued, victim);
        } else if (pick < 72 && !wire.empty()) {
            BOOST_TEST_REQUIRE(!q.cancel(*wire[rnd() % wire.size()]));
        } else if (!wire.empty()) {
            auto expect = wire.front();
            wire.erase(wire.begin());
            auto done = feed(q, bulk("reply"));
            BOOST_TEST_REQUIRE(done == expect);
            if (done->state == pending_state::done)
                BOOST_TEST_REQUIRE(done->replies.size() == 1u);
            else
                BOOST_TEST_REQUIRE(done->replies.empty());
        }
        BOOST_TEST_REQUIRE(q.written_count() == wire.size());
        BOOST_TEST_REQUIRE(q.queued_count() == queued.size());
    }
}

BOOST_AUTO_TEST_SUITE_END()
