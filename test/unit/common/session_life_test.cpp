// SPDX-License-Identifier: BSL-1.0
// The session machine of the etcd and ZooKeeper stores (src/common/session_life.hpp), fed
// inputs with a fake clock: every state (none, up, suspect) against every input.
#include "common/session_life.hpp"

#include <boost/test/unit_test.hpp>

#include <optional>

using dlock::session_event;
using dlock::detail::session_life;
using namespace std::chrono_literals;
using time_point = session_life::time_point;

namespace {

const time_point t0 = time_point{} + 1000s;
time_point at(std::chrono::milliseconds d)
{
    return t0 + d;
}
const session_life::schedule every_1s{1000ms, 250ms};

// A session of 3 s opened by a request sent at t0.
session_life up()
{
    session_life l;
    l.opened(7, t0, 3000ms, every_1s);
    return l;
}
session_life suspect()
{
    auto l = up();
    l.unconfirmed(at(500ms));
    return l;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(session_life_machine)

BOOST_AUTO_TEST_CASE(none_ignores_everything_but_opened)
{
    session_life l;
    BOOST_TEST(l.id() == 0u);
    BOOST_TEST(!l.confirmed(t0).has_value());
    BOOST_TEST(!l.unconfirmed(t0).has_value());
    BOOST_TEST(!l.reconnected().has_value());
    l.heard(t0);
    l.keepalive_sent(t0);
    BOOST_TEST(!l.expired(at(100000s)));  // nothing to lose
    BOOST_TEST(l.info().generation == 0u);
    BOOST_TEST(l.end().generation == 0u);
}

BOOST_AUTO_TEST_CASE(opened_is_up_with_a_deadline_from_the_send_time)
{
    session_life l;
    BOOST_TEST((l.opened(7, t0, 3000ms, every_1s) == session_event::up));
    BOOST_TEST(l.id() == 7u);
    BOOST_TEST(!l.suspect());
    BOOST_TEST(l.drift() == 32ms);  // 1% + 2 ms
    BOOST_TEST((l.deadline() == at(3000ms - 32ms)));
    BOOST_TEST((l.raw_deadline() == at(3000ms)));
    BOOST_TEST((l.next_keepalive() == at(1000ms)));
    auto i = l.info();
    BOOST_TEST(i.generation == 7u);
    BOOST_TEST((i.valid_until == l.deadline()));
    BOOST_TEST(i.ttl == 3000ms);
    // opened again (a new session): its own numbers, up, no suspicion carried over
    l.unconfirmed(at(10ms));
    BOOST_TEST((l.opened(8, at(2000ms), 6000ms, every_1s) == session_event::up));
    BOOST_TEST(!l.suspect());
    BOOST_TEST((l.deadline() == at(2000ms + 6000ms - 62ms)));
}

BOOST_AUTO_TEST_CASE(up_confirmed_moves_the_deadline_and_stays_up)
{
    auto l = up();
    BOOST_TEST((l.confirmed(at(900ms)) == session_event::up));
    BOOST_TEST((l.raw_deadline() == at(3900ms)));
    BOOST_TEST((l.next_keepalive() == at(1900ms)));
    // a confirmation sent earlier than the last one never moves the deadline back
    BOOST_TEST((l.confirmed(at(100ms)) == session_event::up));
    BOOST_TEST((l.raw_deadline() == at(3900ms)));
    // the servers' own ttl when they give one (etcd's keep-alive reply)
    BOOST_TEST((l.confirmed(at(1000ms), 5000ms) == session_event::up));
    BOOST_TEST((l.raw_deadline() == at(6000ms)));
}

BOOST_AUTO_TEST_CASE(up_heard_moves_the_deadline_quietly)
{
    auto l = up();
    l.heard(at(1500ms));
    BOOST_TEST((l.raw_deadline() == at(4500ms)));
    BOOST_TEST((l.next_keepalive() == at(1000ms)));  // the schedule is the keep-alive's
    l.heard(at(10ms));
    BOOST_TEST((l.raw_deadline() == at(4500ms)));
    BOOST_TEST(!l.suspect());
}

BOOST_AUTO_TEST_CASE(up_keepalive_sent_schedules_the_next_one)
{
    auto l = up();
    l.keepalive_sent(at(1000ms));
    BOOST_TEST((l.next_keepalive() == at(2000ms)));
    BOOST_TEST((l.raw_deadline() == at(3000ms)));  // a send proves nothing
}

BOOST_AUTO_TEST_CASE(up_unconfirmed_is_suspect_once_and_asks_again_soon)
{
    auto l = up();
    BOOST_TEST((l.unconfirmed(at(500ms)) == session_event::suspect));
    BOOST_TEST(l.suspect());
    BOOST_TEST((l.next_keepalive() == at(750ms)));
    BOOST_TEST((l.raw_deadline() == at(3000ms)));       // the deadline stands
    BOOST_TEST(!l.unconfirmed(at(800ms)).has_value());  // said once
    BOOST_TEST((l.next_keepalive() == at(1050ms)));
}

BOOST_AUTO_TEST_CASE(up_reconnected_says_nothing)
{
    auto l = up();
    BOOST_TEST(!l.reconnected().has_value());
    BOOST_TEST(!l.suspect());
}

BOOST_AUTO_TEST_CASE(expiry_is_the_deadline_by_the_clock)
{
    auto l = up();
    BOOST_TEST(!l.expired(at(3000ms - 33ms)));
    BOOST_TEST(l.expired(at(3000ms - 32ms)));
    l.heard(at(100ms));
    BOOST_TEST(!l.expired(at(3000ms)));
    auto s = suspect();
    BOOST_TEST(s.expired(at(3000ms)));  // suspect or not, the clock decides
}

BOOST_AUTO_TEST_CASE(suspect_confirmed_is_restored)
{
    auto l = suspect();
    BOOST_TEST((l.confirmed(at(600ms)) == session_event::restored));
    BOOST_TEST(!l.suspect());
    BOOST_TEST((l.raw_deadline() == at(3600ms)));
    BOOST_TEST((l.confirmed(at(700ms)) == session_event::up));  // restored once
}

BOOST_AUTO_TEST_CASE(suspect_reconnected_is_restored_without_moving_the_deadline)
{
    auto l = suspect();
    BOOST_TEST((l.reconnected() == session_event::restored));
    BOOST_TEST(!l.suspect());
    BOOST_TEST((l.raw_deadline() == at(3000ms)));
    BOOST_TEST(!l.reconnected().has_value());
}

BOOST_AUTO_TEST_CASE(suspect_heard_moves_the_deadline_but_stays_suspect)
{
    auto l = suspect();
    l.heard(at(900ms));
    BOOST_TEST(l.suspect());
    BOOST_TEST((l.raw_deadline() == at(3900ms)));
}

BOOST_AUTO_TEST_CASE(end_from_up_or_suspect_returns_what_it_was)
{
    for (auto l : {up(), suspect()}) {
        auto old = l.end();
        BOOST_TEST(old.generation == 7u);
        BOOST_TEST((old.valid_until == at(3000ms - 32ms)));
        BOOST_TEST(l.id() == 0u);
        BOOST_TEST(!l.suspect());
        BOOST_TEST(!l.expired(at(100000s)));
        BOOST_TEST(!l.confirmed(at(1s)).has_value());  // a late reply of the old session
        BOOST_TEST(!l.unconfirmed(at(1s)).has_value());
        BOOST_TEST(l.end().generation == 0u);
    }
}

BOOST_AUTO_TEST_SUITE_END()
