// SPDX-License-Identifier: BSL-1.0
// The store kit the per-session stores (etcd, ZooKeeper) are built on: the watch table
// (src/common/watch_table.hpp, every store's watches), the acquire/release order
// (token_order.hpp), the session gate (session_gate.hpp), and etcd's key slots
// (src/etcd/key_slots.hpp), and the checks and settings the SQL stores share
// (lease_checks.hpp, sql_store_kit.hpp). Each call's meaning, fed by hand; callbacks
// counted after the io_context ran what was posted.
#include <dlock/error.hpp>

#include "common/lease_checks.hpp"
#include "common/session_gate.hpp"
#include "common/sql_store_kit.hpp"
#include "common/token_order.hpp"
#include "common/watch_table.hpp"
#include "etcd/key_slots.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>
#include <vector>

using dlock::grant_notice;
using dlock::session_event;
using dlock::session_info;
using dlock::watch_event;
using dlock::detail::session_gate;
using dlock::detail::token_order;
using dlock::detail::watch_table;
using removed = watch_table::removed;

namespace {

// A table and what each of its watchers heard, by watcher tag.
struct table_fixture {
    boost::asio::io_context io;
    watch_table table{io.get_executor()};
    std::vector<std::pair<std::string, watch_event>> heard;
    std::vector<std::uint64_t> fencing;

    watch_table::added add(const std::string& tag, const std::string& name, const std::string& token = {})
    {
        return table.add(name, token, cb(tag));
    }
    // A callback that records what `tag` heard.
    dlock::store::watch_callback cb(const std::string& tag)
    {
        return [this, tag](watch_event ev, const grant_notice& g) {
            heard.emplace_back(tag, ev);
            if (ev == watch_event::granted)
                fencing.push_back(g.fencing_token);
        };
    }
    // What was heard since the last call, after running what was posted.
    std::vector<std::pair<std::string, watch_event>> drain()
    {
        io.restart();
        io.run();
        return std::exchange(heard, {});
    }
};
using heard_list = std::vector<std::pair<std::string, watch_event>>;

}  // namespace

BOOST_AUTO_TEST_SUITE(watch_table_kit)

BOOST_FIXTURE_TEST_CASE(a_tokened_watcher_is_ready_at_once_never_inside_the_call, table_fixture)
{
    auto a = add("a", "n", "t1");
    BOOST_TEST(!a.starts_name);
    BOOST_TEST(heard.empty());  // posted, not called
    BOOST_TEST((drain() == heard_list{{"a", watch_event::ready}}));
    BOOST_TEST(table.watched("n", "t1"));
    BOOST_TEST(!table.watched("n", "t2"));
}

BOOST_FIXTURE_TEST_CASE(untokened_watchers_wait_for_the_name_to_be_live, table_fixture)
{
    auto a = add("a", "n");
    auto b = add("b", "n");
    BOOST_TEST(a.starts_name);   // the first: the store watches the name now
    BOOST_TEST(!b.starts_name);  // the second shares it
    BOOST_TEST(drain().empty());
    table.tell_name("n", watch_event::released);  // not ready yet: nothing to tell
    BOOST_TEST(drain().empty());
    table.name_ready("n");
    BOOST_TEST((drain() == heard_list{{"a", watch_event::ready}, {"b", watch_event::ready}}));
    table.name_ready("n");  // again: nobody hears ready twice
    BOOST_TEST(drain().empty());
    add("c", "n");  // the name is live: ready at once
    BOOST_TEST((drain() == heard_list{{"c", watch_event::ready}}));
    table.tell_name("n", watch_event::released);
    BOOST_TEST(drain().size() == 3u);
}

BOOST_FIXTURE_TEST_CASE(a_name_going_down_tells_resync_to_those_told_ready_only, table_fixture)
{
    add("a", "n");
    table.name_ready("n");
    BOOST_TEST(drain().size() == 1u);
    table.name_down("n", watch_event::resync);
    BOOST_TEST(!table.name_live("n"));
    add("b", "n");  // down: not ready yet
    BOOST_TEST((drain() == heard_list{{"a", watch_event::resync}}));
    table.name_ready("n");  // up again: only b has not heard ready
    BOOST_TEST((drain() == heard_list{{"b", watch_event::ready}}));
    table.name_down("n");  // without an event: nobody hears
    BOOST_TEST(drain().empty());
}

BOOST_FIXTURE_TEST_CASE(a_grant_goes_to_its_token_only, table_fixture)
{
    add("a", "n", "t1");
    add("b", "n", "t2");
    add("c", "n");
    drain();
    BOOST_TEST(table.tell("n", "t2", watch_event::granted, grant_notice{42}));
    BOOST_TEST(!table.tell("n", "t3", watch_event::granted, grant_notice{43}));
    BOOST_TEST((drain() == heard_list{{"b", watch_event::granted}}));
    BOOST_TEST((fencing == std::vector<std::uint64_t>{42}));
}

BOOST_FIXTURE_TEST_CASE(a_release_of_ours_tells_the_other_tokens, table_fixture)
{
    add("a", "n", "t1");
    add("b", "n", "t2");
    add("c", "n");
    add("d", "m", "t3");
    drain();
    table.tell_tokens("n", "t1", watch_event::released);
    BOOST_TEST((drain() == heard_list{{"b", watch_event::released}}));
}

BOOST_FIXTURE_TEST_CASE(remove_says_what_was_last, table_fixture)
{
    auto a = add("a", "n");
    auto b = add("b", "n");
    auto t = add("t", "n", "t1");
    auto u = add("u", "n", "t1");
    auto s = table.add_session([](session_event, const session_info&) {});
    table.name_ready("n");
    drain();
    auto r = table.remove(a.id);
    BOOST_TEST((r.kind == removed::what::untokened));
    BOOST_TEST(!r.last);
    BOOST_TEST(table.name_live("n"));
    r = table.remove(b.id);
    BOOST_TEST(r.last);  // the store stops watching the name
    BOOST_TEST(r.name == "n");
    BOOST_TEST(!table.name_live("n"));
    r = table.remove(t.id);
    BOOST_TEST((r.kind == removed::what::tokened));
    BOOST_TEST(!r.last);  // u still waits for t1's grant
    r = table.remove(u.id);
    BOOST_TEST(r.last);
    BOOST_TEST(r.token == "t1");
    BOOST_TEST((table.remove(s).kind == removed::what::session));
    BOOST_TEST((table.remove(s).kind == removed::what::none));  // twice: unknown
    BOOST_TEST((table.remove(999).kind == removed::what::none));
}

BOOST_FIXTURE_TEST_CASE(nothing_runs_after_unwatch_even_if_already_posted, table_fixture)
{
    auto a = add("a", "n", "t1");
    table.tell("n", "t1", watch_event::granted, grant_notice{1});
    table.remove(a.id);
    BOOST_TEST(drain().empty());  // ready and granted were posted, and fall into nothing
}

BOOST_FIXTURE_TEST_CASE(after_close_nobody_hears_anything, table_fixture)
{
    add("a", "n", "t1");
    add("b", "n");
    table.name_ready("n");
    table.close();
    table.tell("n", "t1", watch_event::granted);
    table.tell_name("n", watch_event::released);
    auto c = add("c", "n", "t2");  // a watch after close: an id, and silence
    BOOST_TEST(c.id != 0u);
    BOOST_TEST(!c.starts_name);
    BOOST_TEST(!table.tell("n", "t2", watch_event::granted));  // never told ready: no grant either
    BOOST_TEST(drain().empty());
}

BOOST_FIXTURE_TEST_CASE(session_watchers_may_unwatch_each_other, table_fixture)
{
    std::vector<int> calls;
    watch_table::watch_id second = 0;
    table.add_session([&](session_event, const session_info&) {
        calls.push_back(1);
        table.remove(second);  // the callback after it must not run
    });
    second = table.add_session([&](session_event, const session_info&) { calls.push_back(2); });
    table.tell_session(session_event::up, {});
    BOOST_TEST((calls == std::vector<int>{1}));
    table.tell_session(session_event::lost, {});
    BOOST_TEST((calls == std::vector<int>{1, 1}));
}

BOOST_FIXTURE_TEST_CASE(a_live_name_is_ready_at_once_and_stops_with_its_last_watcher, table_fixture)
{
    auto a = table.add_live("n", cb("a"));
    auto b = table.add_live("n", cb("b"));
    BOOST_TEST(a.starts_name);
    BOOST_TEST(!b.starts_name);
    BOOST_TEST(heard.empty());  // posted, not called
    BOOST_TEST(table.name_live("n"));
    BOOST_TEST((drain() == heard_list{{"a", watch_event::ready}, {"b", watch_event::ready}}));
    BOOST_TEST(!table.remove(a.id).last);
    BOOST_TEST(table.remove(b.id).last);  // the store stops what it did for the name
    BOOST_TEST(!table.name_live("n"));
    BOOST_TEST(table.add_live("n", cb("c")).starts_name);  // and starts again
    BOOST_TEST((drain() == heard_list{{"c", watch_event::ready}}));
}

// PostgreSQL: one LISTEN for every name; a token queues only once it is up.
struct with_name_fixture : table_fixture {
    with_name_fixture() { table = watch_table(io.get_executor(), watch_table::tokens::with_name); }
};

BOOST_FIXTURE_TEST_CASE(with_name_a_token_waits_for_the_name_and_hears_its_releases, with_name_fixture)
{
    add("t", "n", "t1");
    add("u", "m");
    BOOST_TEST(drain().empty());                                                // the store's watch is not up yet
    BOOST_TEST(!table.tell("n", "t1", watch_event::granted, grant_notice{7}));  // not ready: not queued
    BOOST_TEST((table.names() == std::set<std::string>{"m", "n"}));
    table.name_ready("n");
    BOOST_TEST((drain() == heard_list{{"t", watch_event::ready}}));
    table.tell_name("n", watch_event::released);
    BOOST_TEST(table.tell("n", "t1", watch_event::granted, grant_notice{8}));
    BOOST_TEST((drain() == heard_list{{"t", watch_event::released}, {"t", watch_event::granted}}));
    BOOST_TEST((fencing == std::vector<std::uint64_t>{8}));
}

BOOST_FIXTURE_TEST_CASE(with_name_the_last_watcher_of_any_kind_ends_the_live_name, with_name_fixture)
{
    auto t = add("t", "n", "t1");
    auto u = add("u", "n");
    table.name_ready("n");
    BOOST_TEST(drain().size() == 2u);
    BOOST_TEST(table.remove(u.id).last);
    BOOST_TEST(table.name_live("n"));  // t still hears the name
    BOOST_TEST(table.remove(t.id).last);
    BOOST_TEST(!table.name_live("n"));
    BOOST_TEST(table.names().empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(token_order_kit)

BOOST_AUTO_TEST_CASE(a_release_waits_for_every_acquire_of_its_token)
{
    token_order o;
    std::vector<std::string> ran;
    token_order::key k{"n", "t"};
    o.after(k, [&] { ran.push_back("idle"); });  // nothing in flight: now
    BOOST_TEST((ran == std::vector<std::string>{"idle"}));
    o.begin(k);
    o.begin(k);  // a retried attempt before the first ended
    BOOST_TEST(o.busy(k));
    BOOST_TEST(!o.busy({"n", "u"}));
    o.after(k, [&] { ran.push_back("r1"); });
    o.after(k, [&] { ran.push_back("r2"); });
    BOOST_TEST(ran.size() == 1u);
    BOOST_TEST(o.end(k).empty());  // one still in flight
    auto run = o.end(k);
    BOOST_TEST(run.size() == 2u);
    BOOST_TEST(!o.busy(k));
    for (auto& f : run)
        f();
    BOOST_TEST((ran == std::vector<std::string>{"idle", "r1", "r2"}));  // in the order they came
    BOOST_TEST(o.end(k).empty());                                       // an end without a begin: nothing
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(session_gate_kit)

BOOST_AUTO_TEST_CASE(the_first_waiter_opens_and_the_outcome_answers_all_in_order)
{
    session_gate g;
    std::vector<std::pair<int, boost::system::error_code>> got;
    BOOST_TEST(!g.opening());
    BOOST_TEST(g.wait([&](boost::system::error_code ec) { got.emplace_back(1, ec); }));
    BOOST_TEST(g.opening());
    BOOST_TEST(!g.wait([&](boost::system::error_code ec) { got.emplace_back(2, ec); }));
    BOOST_TEST(got.empty());
    auto failed = make_error_code(dlock::error::connect_failed);
    g.opened(failed);
    BOOST_TEST(!g.opening());
    BOOST_TEST(got.size() == 2u);
    BOOST_TEST(got[0].first == 1);
    BOOST_TEST(got[1].first == 2);
    BOOST_TEST((got[1].second == failed));
}

BOOST_AUTO_TEST_CASE(a_waiter_that_waits_again_starts_a_new_opening)
{
    session_gate g;
    int opened_again = 0;
    (void)g.wait([&](boost::system::error_code) {
        if (g.wait([](boost::system::error_code) {}))
            ++opened_again;
    });
    g.opened(make_error_code(dlock::error::timeout));
    BOOST_TEST(opened_again == 1);
    BOOST_TEST(g.opening());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(etcd_key_slots)

BOOST_AUTO_TEST_CASE(a_name_has_as_many_slots_as_tokens_at_once)
{
    dlock::etcd::detail::key_slots s;
    BOOST_TEST(!s.find("n", "a").has_value());
    BOOST_TEST(s.assign("n", "a") == 0u);
    BOOST_TEST(s.assign("n", "a") == 0u);  // the same token keeps its slot
    BOOST_TEST(s.assign("n", "b") == 1u);
    BOOST_TEST(s.assign("m", "c") == 0u);  // per name
    s.free("n", "a");
    BOOST_TEST(s.assign("n", "d") == 0u);  // the lowest free slot again
    BOOST_TEST(*s.find("n", "b") == 1u);
    s.free("n", "b");
    s.free("n", "d");
    s.free("m", "c");
    BOOST_TEST(s.empty());  // no name keeps an empty list
    s.assign("n", "x");
    s.clear();
    BOOST_TEST(!s.find("n", "x").has_value());
}

BOOST_AUTO_TEST_CASE(freeing_a_middle_slot_keeps_the_higher_ones)
{
    dlock::etcd::detail::key_slots s;
    s.assign("n", "a");
    s.assign("n", "b");
    s.assign("n", "c");
    s.free("n", "b");
    BOOST_TEST(*s.find("n", "c") == 2u);
    BOOST_TEST(s.assign("n", "e") == 1u);
    s.free("n", "c");
    BOOST_TEST(s.assign("n", "f") == 2u);
}

// A slot keeps its key's create revision until freed: a new token in it starts unknown.
BOOST_AUTO_TEST_CASE(a_slot_keeps_its_keys_create_revision_until_freed)
{
    dlock::etcd::detail::key_slots s;
    s.set_created("n", "a", 5);  // no slot: nothing to keep
    BOOST_TEST(s.created("n", "a") == 0);
    s.assign("n", "a");
    s.assign("n", "b");
    s.set_created("n", "a", 5);
    BOOST_TEST(s.created("n", "a") == 5);
    BOOST_TEST(s.created("n", "b") == 0);
    s.assign("n", "a");  // the same token again keeps it
    BOOST_TEST(s.created("n", "a") == 5);
    s.free("n", "a");
    BOOST_TEST(s.assign("n", "c") == 0u);
    BOOST_TEST(s.created("n", "c") == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sql_store_kit)

BOOST_AUTO_TEST_CASE(a_request_is_refused_for_its_kind_then_its_ttl_then_its_name_then_its_token)
{
    using namespace std::chrono_literals;
    using dlock::detail::key_refusal;
    using dlock::detail::lease_refusal;
    using dlock::detail::sql_valid_ttl;
    BOOST_TEST(sql_valid_ttl(1ms));
    BOOST_TEST(!sql_valid_ttl(0ms));
    BOOST_TEST(sql_valid_ttl(dlock::detail::sql_max_ttl));
    BOOST_TEST(!sql_valid_ttl(dlock::detail::sql_max_ttl + 1ms));
    BOOST_TEST(lease_refusal(dlock::lease_kind::read, false) == dlock::error::not_supported);
    BOOST_TEST(lease_refusal(dlock::lease_kind::mutex, false) == dlock::error::invalid_lease);
    BOOST_TEST(!lease_refusal(dlock::lease_kind::mutex, true));
    boost::system::error_code ok, bad_name = dlock::error::invalid_name, other = dlock::error::protocol_error;
    BOOST_TEST(key_refusal(bad_name, other) == dlock::error::invalid_name);
    BOOST_TEST(key_refusal(ok, other) == dlock::error::protocol_error);
    BOOST_TEST(!key_refusal(ok, ok));
}

BOOST_AUTO_TEST_CASE(a_refused_table_never_reaches_sql_and_its_reason_is_kept)
{
    std::string table = "bad table";
    BOOST_TEST(dlock::detail::refuse_table(table, "not a name", "x_store") == "x_store: config.table: not a name");
    BOOST_TEST(table == "dlock_locks");
    std::string good = "locks";
    BOOST_TEST(dlock::detail::refuse_table(good, "", "x_store").empty());
    BOOST_TEST(good == "locks");
    dlock::lock_status st;
    st.held = true;
    auto keyed = dlock::detail::status_keyed("locks", "n")(boost::system::error_code(), st);
    BOOST_TEST(keyed.key == "locks/n");
    BOOST_TEST(keyed.held);
}

BOOST_AUTO_TEST_SUITE_END()
