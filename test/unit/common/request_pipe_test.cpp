// SPDX-License-Identifier: BSL-1.0
// The request pipe under memcached, MariaDB and PostgreSQL (src/common/request_pipe.hpp), fed inputs
// with a fake clock: each state against each input, both deadline datings, batches and one
// at a time, persistent backoff, and a randomised driver that fails at any step while the
// invariants are checked (each request ends once; one that never left never "may have run").
#include <dlock/error.hpp>

#include "common/request_pipe.hpp"

#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using dlock::detail::pipe_action;
using dlock::detail::pipe_config;
using dlock::detail::pipe_state;
using dlock::detail::request_pipe;
using namespace std::chrono_literals;
using time_point = request_pipe::time_point;
using type = pipe_action::type;
using dlock::error;
using strings = std::vector<std::string>;

namespace {

const time_point t0 = time_point{} + 1000s;
time_point at(std::chrono::milliseconds d)
{
    return t0 + d;
}

// memcached's shape: pipelined batches, deadlines from the request.
pipe_config batched()
{
    pipe_config c;
    c.max_in_flight = 0;
    c.batches = true;
    c.deadline_from_request = true;
    c.request_timeout = 1000ms;
    return c;
}
// The SQL stores' shape: one at a time, deadlines from the send.
pipe_config one_at_a_time()
{
    pipe_config c;
    c.request_timeout = 1000ms;
    return c;
}
pipe_config persistent()
{
    auto c = one_at_a_time();
    c.persistent = true;
    return c;
}

std::string text(const pipe_action& a)
{
    auto g = " g" + std::to_string(a.gen);
    auto id = " #" + std::to_string(a.id);
    switch (a.t) {
    case type::connect: return "connect" + g;
    case type::write: return "write" + g + id;
    case type::flush: return "flush" + g;
    case type::reset: return "reset" + g;
    case type::set_timer: return "timer +" + std::to_string((a.at - t0) / 1ms);
    case type::cancel_timer: return "no timer";
    case type::complete: return "complete" + id + (a.ec ? " " + a.ec.message() : " ok");
    case type::up: return "up" + g;
    case type::down: return "down" + g;
    }
    return "?";
}

struct pipe_fixture {
    std::minstd_rand rng{7};
    request_pipe pipe;
    explicit pipe_fixture(pipe_config c = batched()) : pipe(c, rng) {}

    // The actions since the last call, as text.
    strings take()
    {
        strings out;
        for (auto& a : pipe.actions())
            out.push_back(text(a));
        pipe.actions().clear();
        for (auto& o : out)
            BOOST_TEST_MESSAGE(o);
        return out;
    }
    // A connection up with requests 1..n sent (and, for batches, written).
    void ready_with(unsigned n)
    {
        for (unsigned i = 1; i <= n; ++i)
            pipe.on_request(i, 0ms, t0);
        pipe.on_connected(pipe.gen(), t0);
        take();
    }
};


std::string complete(unsigned id, dlock::error e)
{
    return "complete #" + std::to_string(id) + " " + boost::system::error_code(e).message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(request_pipe_machine)

BOOST_FIXTURE_TEST_CASE(idle_a_request_connects_and_is_bounded_from_its_arrival, pipe_fixture)
{
    pipe.on_request(1, 0ms, t0);
    BOOST_TEST((take() == strings{"connect g1", "timer +1000"}));
    BOOST_TEST((pipe.state() == pipe_state::connecting));
    pipe.on_request(2, 300ms, at(100ms));  // its own bound: earlier, so the timer moves
    BOOST_TEST((take() == strings{"timer +400"}));
    pipe.on_connected(1, at(200ms));
    BOOST_TEST((take() == strings{"up g1", "write g1 #1", "write g1 #2", "flush g1"}));
    BOOST_TEST(pipe.in_flight() == 2u);
}

BOOST_FIXTURE_TEST_CASE(one_at_a_time_the_next_waits_for_the_reply_and_its_clock_starts_at_the_send, pipe_fixture)
{
    request_pipe p(one_at_a_time(), rng);
    auto drain = [&] {
        strings out;
        for (auto& a : p.actions())
            out.push_back(text(a));
        p.actions().clear();
        return out;
    };
    p.on_request(1, 0ms, t0);
    p.on_request(2, 0ms, t0);
    BOOST_TEST((drain() == strings{"connect g1"}));  // no deadline before the send
    p.on_connected(1, at(500ms));
    BOOST_TEST((drain() == strings{"up g1", "write g1 #1", "timer +1500"}));
    p.on_timer(at(1400ms));  // early: #2 waits behind a slow #1 without losing its time
    BOOST_TEST((drain() == strings{"timer +1500"}));
    p.on_reply(1, 1, {}, true, at(1400ms));
    BOOST_TEST((drain() == strings{"complete #1 ok", "write g1 #2"}));  // the timer, due earlier, stays
    p.on_timer(at(1500ms));  // early for #2: nothing ends, the timer goes to #2's deadline
    BOOST_TEST((drain() == strings{"timer +2400"}));
    p.on_reply(1, 2, error::server_error, true, at(1500ms));  // the store's own error keeps the connection
    BOOST_TEST((drain() == strings{complete(2, error::server_error), "no timer"}));
    BOOST_TEST((p.state() == pipe_state::ready));
}

BOOST_FIXTURE_TEST_CASE(ready_batches_wait_for_the_write_before_the_next_batch, pipe_fixture)
{
    ready_with(2);
    pipe.on_request(3, 0ms, at(10ms));
    pipe.on_request(4, 0ms, at(10ms));
    BOOST_TEST(take().empty());  // the first batch is still being written
    pipe.on_written(1, at(20ms));
    BOOST_TEST((take() == strings{"write g1 #3", "write g1 #4", "flush g1"}));
    pipe.on_reply(1, 1, {}, true, at(30ms));
    pipe.on_reply(1, 2, {}, true, at(30ms));
    BOOST_TEST((take() == strings{"complete #1 ok", "complete #2 ok"}));  // #3's deadline is later: no new timer
    BOOST_TEST(pipe.oldest_in_flight() == 3u);
}

BOOST_FIXTURE_TEST_CASE(the_timer_moves_only_earlier_and_goes_when_nothing_waits, pipe_fixture)
{
    ready_with(1);                       // #1 due at +1000
    pipe.on_request(2, 0ms, at(10ms));   // due later: the timer stays
    pipe.on_request(3, 50ms, at(20ms));  // its own bound, due at +70: the timer moves earlier
    BOOST_TEST((take() == strings{"timer +70"}));
    pipe.on_timer(at(70ms));  // #3 never left: it ends alone, the timer goes to the next deadline
    BOOST_TEST((take() == strings{complete(3, error::timeout), "timer +1000"}));
    pipe.on_written(1, at(80ms));
    pipe.on_reply(1, 1, {}, true, at(90ms));
    BOOST_TEST((take() == strings{"write g1 #2", "flush g1", "complete #1 ok"}));  // #2 due later: no new timer
    pipe.on_reply(1, 2, {}, true, at(100ms));
    BOOST_TEST((take() == strings{"complete #2 ok", "no timer"}));  // nothing waits: no timer left behind
}

BOOST_FIXTURE_TEST_CASE(connecting_a_failed_connect_fails_the_queue_and_goes_idle, pipe_fixture)
{
    pipe.on_request(1, 0ms, t0);
    pipe.on_request(2, 0ms, t0);
    take();
    pipe.on_connect_failed(1, error::connect_failed, at(5ms));
    BOOST_TEST((take() == strings{complete(1, error::connect_failed), complete(2, error::connect_failed), "no timer"}));
    BOOST_TEST((pipe.state() == pipe_state::idle));
    pipe.on_request(3, 0ms, at(10ms));  // the next request tries again
    BOOST_TEST((take() == strings{"connect g2", "timer +1010"}));
}

BOOST_FIXTURE_TEST_CASE(a_queued_request_times_out_alone_one_on_the_wire_resets, pipe_fixture)
{
    pipe.on_request(1, 0ms, t0);
    take();
    pipe.on_timer(at(1000ms));  // still connecting: only the request ends
    BOOST_TEST((take() == strings{complete(1, error::timeout)}));
    BOOST_TEST((pipe.state() == pipe_state::connecting));
    pipe.on_request(2, 0ms, at(1000ms));
    pipe.on_request(3, 0ms, at(1500ms));
    pipe.on_connected(1, at(1600ms));
    pipe.on_written(1, at(1600ms));
    take();
    pipe.on_timer(at(2000ms));  // #2 passed its deadline on the wire: #3's reply can't be matched
    BOOST_TEST((take() == strings{complete(2, error::timeout), complete(3, error::connection_lost), "down g1",
                                  "reset g1"}));  // the timer fired: nothing to cancel
    BOOST_TEST((pipe.state() == pipe_state::resetting));
    pipe.on_reset_done(1, at(2010ms));
    BOOST_TEST(take().empty());
    BOOST_TEST((pipe.state() == pipe_state::idle));
}

BOOST_FIXTURE_TEST_CASE(a_drop_fails_what_was_sent_and_keeps_what_was_queued, pipe_fixture)
{
    ready_with(1);
    pipe.on_request(2, 0ms, at(10ms));  // behind the batch being written: queued
    take();
    pipe.on_dropped(1, error::connection_lost, at(20ms));
    BOOST_TEST((take() == strings{complete(1, error::connection_lost), "down g1", "reset g1"}));
    pipe.on_connected(1, at(21ms));  // stale: ignored
    pipe.on_reply(1, 1, {}, true, at(21ms));
    BOOST_TEST(take().empty());
    pipe.on_reset_done(1, at(30ms));
    BOOST_TEST((take() == strings{"connect g2"}));
    pipe.on_connected(2, at(40ms));
    BOOST_TEST((take() == strings{"up g2", "write g2 #2", "flush g2"}));
}

BOOST_FIXTURE_TEST_CASE(not_sent_puts_the_requests_back_in_order, pipe_fixture)
{
    request_pipe p(one_at_a_time(), rng);
    p.on_request(1, 0ms, t0);
    p.on_request(2, 0ms, t0);
    p.on_connected(1, t0);
    p.actions().clear();
    p.on_not_sent(1, at(1ms));  // the connection was found dead before the send
    BOOST_TEST(p.queued() == 2u);
    BOOST_TEST(p.in_flight() == 0u);
    std::vector<type> kinds;
    for (auto& a : p.actions())
        kinds.push_back(a.t);
    BOOST_TEST((kinds == std::vector<type>{type::down, type::reset, type::cancel_timer}));
    p.actions().clear();
    p.on_reset_done(1, at(2ms));
    p.on_connected(2, at(3ms));
    BOOST_TEST(p.oldest_in_flight() == 1u);  // #1 first again, no completion in between
    for (auto& a : p.actions())
        BOOST_TEST((a.t != type::complete));
}

BOOST_FIXTURE_TEST_CASE(a_reply_nobody_asked_for_is_a_protocol_error, pipe_fixture)
{
    ready_with(2);
    pipe.on_reply(1, 2, {}, true, at(1ms));  // #2 answered before #1
    BOOST_TEST((take() == strings{complete(1, error::protocol_error), complete(2, error::protocol_error), "down g1",
                                  "reset g1", "no timer"}));
}

BOOST_FIXTURE_TEST_CASE(a_reply_that_spoils_the_connection_resets_it, pipe_fixture)
{
    request_pipe p(one_at_a_time(), rng);
    p.on_request(1, 0ms, t0);
    p.on_request(2, 0ms, t0);
    p.on_connected(1, t0);
    p.actions().clear();
    p.on_reply(1, 1, error::connection_lost, false, at(1ms));
    strings got;
    for (auto& a : p.actions())
        got.push_back(text(a));
    BOOST_TEST((got == strings{complete(1, error::connection_lost), "down g1", "reset g1", "no timer"}));
    p.actions().clear();
    p.on_reset_done(1, at(2ms));  // #2 never left: it goes on the next connection
    BOOST_TEST(p.actions().size() == 1u);
    BOOST_TEST((p.actions()[0].t == type::connect));
}

BOOST_FIXTURE_TEST_CASE(abort_ends_the_connection_in_every_state_it_has_one, pipe_fixture)
{
    pipe.on_abort(t0);  // idle: nothing to end
    BOOST_TEST(take().empty());
    pipe.on_request(1, 0ms, t0);
    take();
    pipe.on_abort(at(1ms));  // connecting: the request cannot wait for it
    BOOST_TEST((take() == strings{complete(1, error::connect_failed), "reset g1", "no timer"}));
    BOOST_TEST((pipe.state() == pipe_state::resetting));
    pipe.on_connect_failed(1, error::connect_failed, at(2ms));  // the connect unwinding: ignored
    BOOST_TEST(take().empty());
    pipe.on_reset_done(1, at(3ms));
    BOOST_TEST((pipe.state() == pipe_state::idle));
    pipe.on_request(2, 0ms, at(4ms));
    pipe.on_connected(2, at(5ms));
    take();
    pipe.on_abort(at(6ms));  // ready: what is on the wire may have run
    BOOST_TEST((take() == strings{complete(2, error::connection_lost), "down g2", "reset g2", "no timer"}));
}

BOOST_FIXTURE_TEST_CASE(close_fails_everything_and_then_every_request, pipe_fixture)
{
    ready_with(1);
    pipe.on_request(2, 0ms, at(1ms));
    take();
    pipe.on_close();
    BOOST_TEST((take() == strings{complete(1, error::closed), complete(2, error::closed), "reset g1", "no timer"}));
    pipe.on_request(3, 0ms, at(2ms));
    BOOST_TEST((take() == strings{complete(3, error::closed)}));
    pipe.on_reply(1, 1, {}, true, at(3ms));
    pipe.on_dropped(1, error::connection_lost, at(3ms));
    pipe.on_reset_done(1, at(3ms));
    pipe.on_timer(at(5000ms));
    pipe.on_close();
    BOOST_TEST(take().empty());
    BOOST_TEST((pipe.state() == pipe_state::closed));
}

BOOST_FIXTURE_TEST_CASE(close_while_idle_or_resetting_resets_nothing_more, pipe_fixture)
{
    pipe.on_close();
    BOOST_TEST(take().empty());
    pipe_fixture f2;
    f2.ready_with(1);
    f2.pipe.on_dropped(1, error::connection_lost, t0);
    f2.take();
    f2.pipe.on_close();  // the reset under way ends the connection
    BOOST_TEST(f2.take().empty());
}

BOOST_FIXTURE_TEST_CASE(a_refused_configuration_fails_every_request_and_never_connects, pipe_fixture)
{
    auto c = one_at_a_time();
    c.refused = true;
    request_pipe p(c, rng);
    p.on_start(t0);
    p.on_request(1, 0ms, t0);
    BOOST_TEST(p.actions().size() == 1u);
    BOOST_TEST(text(p.actions()[0]) == complete(1, error::invalid_option));
}

BOOST_FIXTURE_TEST_CASE(persistent_connects_at_start_and_backs_off_with_jitter, pipe_fixture)
{
    request_pipe p(persistent(), rng);
    p.on_start(t0);
    BOOST_TEST(p.actions().size() == 1u);
    BOOST_TEST((p.actions()[0].t == type::connect));
    auto now = t0;
    for (auto step : {100ms, 200ms, 400ms, 800ms, 1600ms, 2000ms, 2000ms}) {
        p.actions().clear();
        p.on_connect_failed(p.gen(), error::connect_failed, now);
        BOOST_TEST((p.state() == pipe_state::backing_off));
        BOOST_TEST(p.actions().size() == 1u);
        auto a = p.actions().at(0);
        BOOST_TEST((a.t == type::set_timer));
        BOOST_TEST((a.at >= now + step / 2 && a.at <= now + step));  // equal jitter in [d/2, d]
        p.actions().clear();
        p.on_timer(a.at);
        BOOST_TEST((p.actions().at(0).t == type::connect));
        now = a.at;
    }
    p.on_connected(p.gen(), now);  // success resets the step
    p.on_dropped(p.gen(), error::connection_lost, now);
    p.actions().clear();
    p.on_reset_done(p.gen(), now);  // a drop reconnects at once
    BOOST_TEST((p.actions().at(0).t == type::connect));
    p.actions().clear();
    p.on_connect_failed(p.gen(), error::connect_failed, now);
    BOOST_TEST((p.actions().at(0).at <= now + 100ms));
}

BOOST_FIXTURE_TEST_CASE(an_early_timer_and_a_request_during_backoff_wait, pipe_fixture)
{
    request_pipe p(persistent(), rng);
    p.on_start(t0);
    p.on_connect_failed(1, error::connect_failed, t0);
    auto retry = p.actions().back().at;
    p.actions().clear();
    p.on_request(1, 0ms, t0);  // queued until the connection is back
    p.on_timer(retry - 1ms);
    BOOST_TEST((p.state() == pipe_state::backing_off));
    p.on_timer(retry);
    BOOST_TEST((p.state() == pipe_state::connecting));
    p.actions().clear();
    p.on_connected(2, retry);
    BOOST_TEST(p.oldest_in_flight() == 1u);
}

// A driver that answers every action as a real one might, with a fault at a random step,
// many times over: each request ends exactly once, one that never left never ends with
// connection_lost or protocol_error, the bound on the wire holds, and nothing connects
// while an old connection is being ended.
BOOST_AUTO_TEST_CASE(random_faults_keep_the_invariants)
{
    for (int round = 0; round < 3000; ++round) {
        std::minstd_rand rng(round + 1);
        std::mt19937 pick(round);
        auto cfg = round % 3 == 0 ? batched() : round % 3 == 1 ? one_at_a_time() : persistent();
        if (round % 5 == 0)
            cfg.max_in_flight = 2;
        request_pipe p(cfg, rng);
        std::map<std::uint64_t, int> ended;
        std::set<std::uint64_t> ever_written;
        std::uint64_t next_id = 1;
        auto now = t0;
        bool writing = false, connecting = false, resetting = false;
        auto check = [&] {
            for (auto& a : p.actions()) {
                if (a.t == type::complete) {
                    BOOST_TEST_REQUIRE(++ended[a.id] == 1);
                    if (!ever_written.count(a.id))
                        BOOST_TEST_REQUIRE((a.ec != error::connection_lost && a.ec != error::protocol_error));
                }
                if (a.t == type::write)
                    ever_written.insert(a.id);
                if (a.t == type::connect) {
                    BOOST_TEST_REQUIRE(!resetting);
                    connecting = true;
                }
                if (a.t == type::reset)
                    resetting = true;
                if (a.t == type::flush)
                    writing = true;
            }
            p.actions().clear();
            BOOST_TEST_REQUIRE((cfg.max_in_flight == 0 || p.in_flight() <= cfg.max_in_flight));
        };
        p.on_start(now);
        check();
        for (int step = 0; step < 40; ++step) {
            now += std::chrono::milliseconds(pick() % 400);
            auto g = p.gen();
            switch (pick() % 12) {
            case 0:
            case 1: p.on_request(next_id++, std::chrono::milliseconds(pick() % 3 * 500), now); break;
            case 2:
                if (connecting)
                    p.on_connected(g, now), connecting = false;
                break;
            case 3:
                if (connecting)
                    p.on_connect_failed(g, error::connect_failed, now), connecting = false;
                break;
            case 4:
                if (writing)
                    p.on_written(g, now), writing = false;
                break;
            case 5:
            case 6:
                if (auto id = p.oldest_in_flight())
                    p.on_reply(g, id, {}, pick() % 4 != 0, now);
                break;
            case 7: p.on_dropped(g, error::connection_lost, now); break;
            case 8: p.on_not_sent(g, now); break;
            case 9:
                if (resetting)
                    p.on_reset_done(g, now), resetting = false, writing = false;
                break;
            case 10: p.on_timer(now); break;
            case 11: p.on_abort(now); break;
            }
            check();
            if (p.state() == pipe_state::resetting)
                connecting = false;
        }
        p.on_close();
        check();
        BOOST_TEST_REQUIRE(ended.size() == next_id - 1);  // every request ended, by close if not before
    }
}

BOOST_AUTO_TEST_SUITE_END()
