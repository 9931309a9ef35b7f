// SPDX-License-Identifier: BSL-1.0
// MariaDB's doorbell (src/mariadb/doorbell.hpp), fed inputs: the sleeper learns its id, names
// are enrolled and told `ready`, a ring read is `released` once, a reconnect (another id, or
// the same id in another session) enrols every name again and says `resync`, a name
// unwatched before its enrolment is taken out again, a failed enrolment is tried again, no
// bell table makes every name ready at once, failures back off, close() ends it.
#include "mariadb/doorbell.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using dlock::mariadb::detail::bell_action;
using dlock::mariadb::detail::bell_reading;
using dlock::mariadb::detail::doorbell;
using strings = std::vector<std::string>;

namespace {

std::string text(const bell_action& a)
{
    std::string names;
    for (const auto& n : a.names)
        names += " " + n;
    switch (a.t) {
    case bell_action::type::sleep:
        return "sleep " +
               (a.baseline.first == ~std::uint64_t{0}
                    ? std::string("-")
                    : std::to_string(a.baseline.first) + "/" + std::to_string(a.baseline.second)) +
               " after " + std::to_string(a.delay.count());
    case bell_action::type::enrol: return "enrol " + std::to_string(a.conn) + names;
    case bell_action::type::leave: return "leave " + std::to_string(a.conn) + names;
    case bell_action::type::ready: return "ready" + names;
    case bell_action::type::released: return "released" + names;
    case bell_action::type::resync: return "resync" + names;
    }
    return "?";
}

strings take(doorbell& b)
{
    strings out;
    for (auto& a : b.actions())
        out.push_back(text(a));
    b.actions().clear();
    return out;
}

bell_reading reading(std::uint64_t conn, std::vector<std::pair<std::string, std::uint64_t>> rows,
                     std::string session = "s1")
{
    bell_reading r{conn, std::move(session), {}};
    for (auto& [n, k] : rows)
        r.rows.push_back({n, k, std::nullopt, 0});
    return r;
}

// A bell with "a" enrolled for sleeper 7 and one reading taken (baseline 1/0), sleeping.
doorbell enrolled_a()
{
    doorbell b;
    b.watch("a");
    b.on_sleep_done(reading(7, {}), false);
    b.on_enrolled({"a"}, 7, true);
    b.on_sleep_done(reading(7, {{"a", 0}}), false);
    b.actions().clear();
    return b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mariadb_doorbell)

BOOST_AUTO_TEST_CASE(a_first_watch_learns_the_sleeper_then_enrols_then_says_ready)
{
    doorbell b;
    b.watch("a");
    BOOST_TEST(take(b) == strings({"sleep - after 0"}));
    b.watch("a");  // a second watcher of the name: nothing new
    BOOST_TEST(take(b).empty());
    b.on_sleep_done(reading(7, {}), false);
    BOOST_TEST(take(b) == strings({"enrol 7 a", "sleep - after 0"}));
    BOOST_TEST(!b.enrolled("a"));
    b.on_enrolled({"a"}, 7, true);
    BOOST_TEST(take(b) == strings({"ready a"}));  // the sleep is out already
    BOOST_TEST(b.enrolled("a"));
    b.on_sleep_done(reading(7, {{"a", 0}}), false);
    BOOST_TEST(take(b) == strings({"sleep 1/0 after 0"}));
    b.watch("b");  // the id is known: enrolled at once
    BOOST_TEST(take(b) == strings({"enrol 7 b"}));
}

BOOST_AUTO_TEST_CASE(a_ring_is_told_once_and_a_rereading_tells_nothing)
{
    auto b = enrolled_a();
    b.on_sleep_done(reading(7, {{"a", 0}}), false);  // killed before the ring's count was read
    BOOST_TEST(take(b) == strings({"sleep 1/0 after 0"}));
    b.on_sleep_done(reading(7, {{"a", 1}}), false);
    BOOST_TEST(take(b) == strings({"released a", "sleep 1/1 after 0"}));
    b.on_sleep_done(reading(7, {{"a", 1}}), false);
    BOOST_TEST(take(b) == strings({"sleep 1/1 after 0"}));
    // A name not (yet) enrolled here is not told: its `ready` is still to come.
    b.watch("c");
    take(b);
    b.on_sleep_done(reading(7, {{"a", 1}, {"c", 3}}), false);
    BOOST_TEST(take(b) == strings({"sleep 2/4 after 0"}));
}

BOOST_AUTO_TEST_CASE(a_new_sleeper_connection_enrols_every_name_again_and_says_resync)
{
    auto b = enrolled_a();
    b.watch("b");
    BOOST_TEST(take(b) == strings({"enrol 7 b"}));
    b.on_sleep_done(reading(9, {}), false);  // reconnected: another id
    BOOST_TEST(take(b) == strings({"leave 7", "enrol 9 a b", "sleep - after 0"}));
    BOOST_TEST(!b.enrolled("a"));
    b.on_enrolled({"b"}, 7, true);  // the old connection's enrolment: ignored
    BOOST_TEST(take(b).empty());
    b.on_enrolled({"a", "b"}, 9, true);
    BOOST_TEST(take(b) == strings({"ready b", "resync a"}));
    BOOST_TEST(b.conn() == 9u);
}

BOOST_AUTO_TEST_CASE(names_unwatched_leave_even_when_their_enrolment_comes_after)
{
    auto b = enrolled_a();
    b.unwatch("a");
    BOOST_TEST(take(b) == strings({"leave 7 a"}));
    b.watch("d");
    BOOST_TEST(take(b) == strings({"enrol 7 d"}));  // the sleeper is out already
    b.unwatch("d");                                 // before its row went in
    BOOST_TEST(take(b).empty());
    b.on_enrolled({"d"}, 7, true);
    BOOST_TEST(take(b) == strings({"leave 7 d"}));
    b.on_sleep_done(reading(7, {}), false);  // nothing watched: the sleeper stops
    BOOST_TEST(take(b).empty());
}

BOOST_AUTO_TEST_CASE(a_failed_enrolment_says_ready_and_is_tried_again_after_the_next_sleep)
{
    doorbell b;
    b.watch("a");
    b.on_sleep_done(reading(7, {}), false);
    take(b);
    b.on_enrolled({"a"}, 7, false);  // a reconnect of the main connection, a full table
    BOOST_TEST(take(b) == strings({"ready a"}));
    BOOST_TEST(!b.enrolled("a"));
    b.on_sleep_done(reading(7, {}), false);
    BOOST_TEST(take(b) == strings({"enrol 7 a", "sleep 0/0 after 0"}));
    b.on_enrolled({"a"}, 7, true);
    BOOST_TEST(take(b) == strings({"resync a"}));  // it may have missed a ring meanwhile
    BOOST_TEST(b.enrolled("a"));
}

// A server restart can give the new sleeper the old one's id: its session tells them apart.
BOOST_AUTO_TEST_CASE(the_same_id_in_another_session_is_another_sleeper)
{
    auto b = enrolled_a();
    b.on_sleep_done(reading(7, {}, "s2"), false);
    BOOST_TEST(take(b) == strings({"leave 7", "enrol 7 a", "sleep - after 0"}));
    BOOST_TEST(!b.enrolled("a"));
}

// No bell table for this user: every name is ready at once, now and later, and nothing sleeps.
BOOST_AUTO_TEST_CASE(without_a_bell_table_every_name_is_ready_at_once)
{
    doorbell b;
    b.watch("a");
    take(b);
    b.on_unavailable();
    BOOST_TEST(take(b) == strings({"ready a"}));
    b.on_sleep_done(bell_reading{}, true);
    BOOST_TEST(take(b).empty());
    b.watch("b");
    BOOST_TEST(take(b) == strings({"ready b"}));
    BOOST_TEST(!b.enrolled("b"));
}

BOOST_AUTO_TEST_CASE(failed_sleeps_back_off_and_a_good_one_resets)
{
    auto b = enrolled_a();
    b.on_sleep_done(bell_reading{}, true);
    BOOST_TEST(take(b) == strings({"sleep 1/0 after 100"}));
    b.on_sleep_done(bell_reading{}, true);
    BOOST_TEST(take(b) == strings({"sleep 1/0 after 200"}));
    for (int i = 0; i < 6; ++i)
        b.on_sleep_done(bell_reading{}, true);
    BOOST_TEST(take(b).back() == "sleep 1/0 after 2000");
    b.on_sleep_done(reading(7, {{"a", 0}}), false);
    BOOST_TEST(take(b) == strings({"sleep 1/0 after 0"}));
}

BOOST_AUTO_TEST_CASE(close_ends_everything)
{
    auto b = enrolled_a();
    b.close();
    b.on_sleep_done(reading(7, {{"a", 5}}), false);
    b.on_enrolled({"a"}, 7, true);
    b.watch("z");
    BOOST_TEST(take(b).empty());
}

BOOST_AUTO_TEST_SUITE_END()
