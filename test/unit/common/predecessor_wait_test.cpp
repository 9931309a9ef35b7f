// SPDX-License-Identifier: BSL-1.0
// A queued token's wait for its predecessor (src/common/predecessor_wait.hpp), fed inputs:
// every state against every input as one table (retrying, as etcd; and the rows that differ
// when failures end the wait, as ZooKeeper), then the sequences the table cannot show.
#include "common/predecessor_wait.hpp"

#include <boost/test/unit_test.hpp>

#include <functional>
#include <random>
#include <string>
#include <vector>

using dlock::detail::predecessor_wait;
using dlock::detail::wait_action;
using dlock::detail::wait_state;
using namespace std::chrono_literals;
using strings = std::vector<std::string>;

namespace {

std::string text(const wait_action& a)
{
    using type = wait_action::type;
    switch (a.t) {
    case type::check: return "check";
    case type::watch: return "watch " + a.key;
    case type::cancel_watch: return "cancel watch";
    case type::set_timer: return "timer";
    case type::cancel_timer: return "cancel timer";
    case type::grant: return "grant";
    case type::resync: return "resync";
    }
    return "?";
}

strings take(predecessor_wait& w)
{
    strings out;
    for (auto& a : w.actions())
        out.push_back(text(a));
    w.actions().clear();
    return out;
}

const char* name(wait_state s)
{
    switch (s) {
    case wait_state::idle: return "idle";
    case wait_state::checking: return "checking";
    case wait_state::watching: return "watching";
    case wait_state::pausing: return "pausing";
    case wait_state::done: return "done";
    }
    return "?";
}

using step = std::function<void(predecessor_wait&)>;

// The states, each reached by the inputs that lead there ("+W": the predecessor "a" watched).
struct setup {
    const char* label;
    std::vector<step> path;
};
const step start = [](predecessor_wait& w) { w.start(); };
const step behind_a = [](predecessor_wait& w) { w.on_behind("a", 5); };
const step ready_later = [](predecessor_wait& w) { w.on_watch_ready("a", 6); };
const step failed_read = [](predecessor_wait& w) { w.on_check_failed(); };
const step first = [](predecessor_wait& w) { w.on_first(); };

const std::vector<setup> setups{
    {"idle", {}},
    {"checking", {start}},
    {"checking+W", {start, behind_a, ready_later}},
    {"watching", {start, behind_a}},
    {"pausing", {start, failed_read}},
    {"pausing+W", {start, behind_a, ready_later, failed_read}},
    {"done", {start, first}},
};

struct input {
    const char* label;
    step feed;
};
const std::vector<input> inputs{
    {"start", start},
    {"first", first},
    {"gone", [](predecessor_wait& w) { w.on_gone(); }},
    {"behind a", [](predecessor_wait& w) { w.on_behind("a", 7); }},
    {"behind b", [](predecessor_wait& w) { w.on_behind("b", 7); }},
    {"check failed", failed_read},
    {"a ready past the read", [](predecessor_wait& w) { w.on_watch_ready("a", 9); }},
    {"a ready at the read", [](predecessor_wait& w) { w.on_watch_ready("a", 5); }},
    {"a gone", [](predecessor_wait& w) { w.on_predecessor_gone("a"); }},
    {"b gone (stale)", [](predecessor_wait& w) { w.on_predecessor_gone("b"); }},
    {"a failed", [](predecessor_wait& w) { w.on_watch_failed("a"); }},
    {"timer", [](predecessor_wait& w) { w.on_timer(); }},
    {"lost", [](predecessor_wait& w) { w.on_lost(); }},
    {"abandon", [](predecessor_wait& w) { w.on_abandon(); }},
};

struct outcome {
    strings actions;
    const char* state;
};

// Rows: inputs in the order above; columns: setups in the order above.
const outcome same{{}, nullptr};  // nothing done, the state unchanged
const std::vector<std::vector<outcome>> retrying{
    // start
    {{{"check"}, "checking"}, same, same, same, same, same, same},
    // first
    {same, {{"grant"}, "done"}, {{"cancel watch", "grant"}, "done"}, same, same, same, same},
    // gone
    {same, {{"resync"}, "done"}, {{"cancel watch", "resync"}, "done"}, same, same, same, same},
    // behind a
    {same, {{"watch a"}, "watching"}, {{}, "watching"}, same, same, same, same},
    // behind b
    {same, {{"watch b"}, "watching"}, {{"cancel watch", "watch b"}, "watching"}, same, same, same, same},
    // check failed
    {same, {{"timer"}, "pausing"}, {{"timer"}, "pausing"}, same, same, same, same},
    // a ready past the read
    {same, same, same, {{"check"}, "checking"}, same, same, same},
    // a ready at the read
    {same, same, same, same, same, same, same},
    // a gone
    {same,
     same,
     {{"cancel watch"}, "checking"},
     {{"cancel watch", "check"}, "checking"},
     same,
     {{"cancel watch"}, "pausing"},
     same},
    // b gone (stale)
    {same, same, same, same, same, same, same},
    // a failed
    {same,
     same,
     {{"cancel watch"}, "checking"},
     {{"cancel watch", "timer"}, "pausing"},
     same,
     {{"cancel watch"}, "pausing"},
     same},
    // timer
    {same, same, same, same, {{"check"}, "checking"}, {{"check"}, "checking"}, same},
    // lost
    {{{"resync"}, "done"},
     {{"resync"}, "done"},
     {{"cancel watch", "resync"}, "done"},
     {{"cancel watch", "resync"}, "done"},
     {{"cancel timer", "resync"}, "done"},
     {{"cancel timer", "cancel watch", "resync"}, "done"},
     same},
    // abandon
    {{{}, "done"},
     {{}, "done"},
     {{"cancel watch"}, "done"},
     {{"cancel watch"}, "done"},
     {{"cancel timer"}, "done"},
     {{"cancel timer", "cancel watch"}, "done"},
     same},
};

void check_cell(bool retry, std::size_t s, std::size_t i, const outcome& want)
{
    std::minstd_rand rng(1);
    predecessor_wait w(retry ? &rng : nullptr);
    for (auto& f : setups[s].path)
        f(w);
    w.actions().clear();
    auto before = w.state();
    inputs[i].feed(w);
    BOOST_TEST_CONTEXT(setups[s].label << " x " << inputs[i].label << (retry ? "" : " (resync)"))
    {
        BOOST_TEST(take(w) == want.actions);
        BOOST_TEST(name(w.state()) == (want.state ? want.state : name(before)));
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(predecessor_wait_machine)

BOOST_AUTO_TEST_CASE(every_state_against_every_input_retrying)
{
    BOOST_TEST_REQUIRE(retrying.size() == inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        BOOST_TEST_REQUIRE(retrying[i].size() == setups.size());
        for (std::size_t s = 0; s < setups.size(); ++s)
            check_cell(true, s, i, retrying[i][s]);
    }
}

// Without retries (ZooKeeper) the states are those of the table but the pauses; a failed
// read or watch ends the wait with resync, and every other cell is the same.
BOOST_AUTO_TEST_CASE(without_retries_a_failure_ends_the_wait)
{
    const std::size_t check_failed = 5, a_failed = 10;
    for (std::size_t s : {0u, 1u, 2u, 3u, 6u}) {
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            auto want = retrying[i][s];
            if (i == check_failed && (s == 1 || s == 2))
                want = s == 1 ? outcome{{"resync"}, "done"} : outcome{{"cancel watch", "resync"}, "done"};
            if (i == a_failed && (s == 2 || s == 3))
                want = outcome{{"cancel watch", "resync"}, "done"};
            check_cell(false, s, i, want);
        }
    }
}

BOOST_AUTO_TEST_CASE(a_predecessor_gone_during_the_read_reads_again_instead_of_watching)
{
    std::minstd_rand rng(1);
    predecessor_wait w(&rng);
    for (auto& f : setups[2].path)  // checking, "a" watched
        f(w);
    w.actions().clear();
    w.on_predecessor_gone("a");
    BOOST_TEST((take(w) == strings{"cancel watch"}));
    w.on_behind("a", 8);  // a read from before the deletion
    BOOST_TEST((take(w) == strings{"check"}));
    w.on_first();
    BOOST_TEST((take(w) == strings{"grant"}));
}

BOOST_AUTO_TEST_CASE(a_watch_made_past_the_read_reads_again_after_the_read_in_flight)
{
    std::minstd_rand rng(1);
    predecessor_wait w(&rng);
    for (auto& f : setups[2].path)
        f(w);
    w.actions().clear();
    w.on_watch_ready("a", 12);  // past the read of revision 5
    BOOST_TEST(take(w).empty());
    w.on_behind("a", 10);
    BOOST_TEST((take(w) == strings{"check"}));
    w.on_behind("a", 12);
    BOOST_TEST(take(w).empty());  // "a" is watched already
    BOOST_TEST((w.state() == wait_state::watching));
    BOOST_TEST(w.watching() == "a");
}

BOOST_AUTO_TEST_CASE(pauses_double_with_jitter_and_a_good_read_resets_them)
{
    std::minstd_rand rng(7);
    predecessor_wait w(&rng);
    w.start();
    auto step = 20ms;
    for (int i = 0; i < 8; ++i) {
        w.actions().clear();
        w.on_check_failed();
        BOOST_TEST_REQUIRE(w.actions().size() == 1u);
        auto d = w.actions()[0].delay;
        BOOST_TEST((d >= step / 2 && d <= step));
        step = std::min(step * 2, std::chrono::milliseconds(1000));
        w.actions().clear();
        w.on_timer();
        BOOST_TEST((take(w) == strings{"check"}));
    }
    w.on_behind("a", 3);
    BOOST_TEST((take(w) == strings{"watch a"}));
    w.on_watch_failed("a");
    BOOST_TEST_REQUIRE(w.actions().size() == 2u);
    BOOST_TEST((w.actions()[1].delay <= 20ms));  // back to the first step
}

// The wait of a queue of three, as the store sees it: the one before us goes, then the next.
BOOST_AUTO_TEST_CASE(a_queue_moves_up_until_the_grant)
{
    std::minstd_rand rng(1);
    predecessor_wait w(&rng);
    w.start();
    BOOST_TEST((take(w) == strings{"check"}));
    w.on_behind("k2", 10);
    BOOST_TEST((take(w) == strings{"watch k2"}));
    w.on_watch_ready("k2", 10);
    BOOST_TEST(take(w).empty());
    w.on_predecessor_gone("k2");
    BOOST_TEST((take(w) == strings{"cancel watch", "check"}));
    w.on_predecessor_gone("k2");  // told twice (the deletion and the cancel): once is enough
    BOOST_TEST(take(w).empty());
    w.on_behind("k1", 11);
    BOOST_TEST((take(w) == strings{"watch k1"}));
    w.on_predecessor_gone("k1");
    BOOST_TEST((take(w) == strings{"cancel watch", "check"}));
    w.on_first();
    BOOST_TEST((take(w) == strings{"grant"}));
    BOOST_TEST(w.done());
    w.on_lost();
    BOOST_TEST(take(w).empty());
}

BOOST_AUTO_TEST_CASE(drive_performs_in_order_and_inputs_raised_meanwhile_after_the_batch)
{
    std::minstd_rand rng(1);
    predecessor_wait w(&rng);
    for (auto& f : setups[2].path)  // checking, "a" watched
        f(w);
    w.actions().clear();
    strings done;
    std::function<void(const wait_action&)> perform = [&](const wait_action& a) {
        done.push_back(text(a));
        if (a.t == wait_action::type::cancel_watch && done.size() == 1)  // a store whose cancel tells at once
            drive(
                w, [](predecessor_wait& x) { x.on_lost(); }, perform);
    };
    drive(
        w, [](predecessor_wait& x) { x.on_behind("b", 9); }, perform);
    // The watch of "b" is asked before the lost input's actions run: order kept, none nested.
    BOOST_TEST((done == strings{"cancel watch", "watch b", "cancel watch", "resync"}));
    BOOST_TEST(w.done());
    BOOST_TEST(!w.driving);
    BOOST_TEST(w.actions().empty());
}

BOOST_AUTO_TEST_CASE(an_input_raised_while_checking_ends_the_wait_after_the_check_is_asked)
{
    predecessor_wait w;
    strings done;
    std::function<void(const wait_action&)> perform = [&](const wait_action& a) {
        done.push_back(text(a));
        if (a.t == wait_action::type::check)  // the store finds nobody waiting any more
            drive(
                w, [](predecessor_wait& x) { x.on_abandon(); }, perform);
    };
    drive(
        w, [](predecessor_wait& x) { x.start(); }, perform);
    BOOST_TEST((done == strings{"check"}));
    BOOST_TEST(w.done());
    BOOST_TEST(w.actions().empty());
}

BOOST_AUTO_TEST_SUITE_END()
