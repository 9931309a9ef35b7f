// SPDX-License-Identifier: BSL-1.0
// MariaDB's GET_LOCK wait pool (src/mariadb/wait_pool.hpp), fed inputs: every state of a
// name against every input as one table (a pool of one connection, so that a busy pool and
// its freeing show), then the cases the table cannot show.
#include "mariadb/wait_pool.hpp"

#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>
#include <vector>

using dlock::mariadb::detail::pool_action;
using dlock::mariadb::detail::wait_end;
using dlock::mariadb::detail::wait_pool;
using namespace std::chrono_literals;
using strings = std::vector<std::string>;

namespace {

std::string text(const pool_action& a)
{
    auto k = std::to_string(a.slot);
    switch (a.t) {
    case pool_action::type::open: return "open " + k;
    case pool_action::type::wait: return "wait " + k + " " + a.name + " " + std::to_string(a.timeout.count());
    case pool_action::type::abort: return "abort " + k + " " + a.name;
    case pool_action::type::released: return "released " + a.name;
    case pool_action::type::resync: return "resync " + a.name;
    }
    return "?";
}

strings take(wait_pool& p)
{
    strings out;
    for (auto& a : p.actions())
        out.push_back(text(a));
    p.actions().clear();
    return out;
}

using step = std::function<void(wait_pool&)>;
step seen(const char* name, std::chrono::milliseconds remaining)
{
    return [=](wait_pool& p) { p.observe(name, true, remaining, true); };
}

// The states of "n" ("m" is another name), each reached by the inputs that lead there.
struct setup {
    const char* label;
    std::vector<step> path;
};
const std::vector<setup> setups{
    {"none", {}},
    {"known", {seen("n", 500ms), [](wait_pool& p) { p.on_done(0, wait_end::released, true); }}},
    {"pending", {seen("m", 500ms), seen("n", 500ms)}},
    {"waiting", {seen("n", 500ms)}},
    {"waiting+seen", {seen("n", 500ms), seen("n", 700ms)}},
};

struct input {
    const char* label;
    std::function<bool(wait_pool&)> feed;  // observe's answer; false for the others
};
const std::vector<input> inputs{
    {"seen with the signal", [](wait_pool& p) { return p.observe("n", true, 300ms, true); }},
    {"seen without the signal", [](wait_pool& p) { return p.observe("n", false, 300ms, true); }},
    {"seen, not watched", [](wait_pool& p) { return p.observe("n", true, 300ms, false); }},
    {"slot 0 released", [](wait_pool& p) { return p.on_done(0, wait_end::released, true), false; }},
    {"slot 0 timed out", [](wait_pool& p) { return p.on_done(0, wait_end::timed_out, true), false; }},
    {"slot 0 failed", [](wait_pool& p) { return p.on_done(0, wait_end::failed, true), false; }},
    {"slot 0 ended, its name unwatched", [](wait_pool& p) { return p.on_done(0, wait_end::released, false), false; }},
    {"n unwatched", [](wait_pool& p) { return p.on_unwatched("n"), false; }},
    {"close", [](wait_pool& p) { return p.close(), false; }},
};

struct outcome {
    strings actions;
    const char* state;
    bool woken = false;
};

// Rows: inputs in the order above; columns: setups in the order above.
const std::vector<std::vector<outcome>> table{
    // seen with the signal
    {{{"open 0", "wait 0 n 1300"}, "waiting", true},
     {{"wait 0 n 1300"}, "waiting", true},
     {{}, "pending"},  // the pool is busy: the waiters sleep the holder's lease
     {{}, "waiting+seen", true},
     {{}, "waiting+seen", true}},
    // seen without the signal
    {{{}, "none"}, {{}, "known"}, {{}, "pending"}, {{}, "waiting"}, {{}, "waiting+seen"}},
    // seen, not watched
    {{{}, "none"}, {{}, "known"}, {{}, "pending"}, {{}, "waiting"}, {{}, "waiting+seen"}},
    // slot 0 released ("pending": m's wait; its connection goes to n)
    {{{}, "none"},
     {{}, "known"},
     {{"released m", "wait 0 n 1500"}, "waiting"},
     {{"released n"}, "known"},
     {{"released n", "wait 0 n 1700"}, "waiting"}},
    // slot 0 timed out
    {{{}, "none"}, {{}, "known"}, {{"wait 0 n 1500"}, "waiting"}, {{}, "known"}, {{"wait 0 n 1700"}, "waiting"}},
    // slot 0 failed
    {{{}, "none"},
     {{}, "known"},
     {{"resync m", "wait 0 n 1500"}, "waiting"},
     {{"resync n"}, "known"},
     {{"resync n", "wait 0 n 1700"}, "waiting"}},
    // slot 0 ended, its name unwatched
    {{{}, "none"}, {{}, "known"}, {{"wait 0 n 1500"}, "waiting"}, {{}, "none"}, {{}, "none"}},
    // n unwatched
    {{{}, "none"}, {{}, "none"}, {{}, "none"}, {{"abort 0 n"}, "waiting"}, {{"abort 0 n"}, "waiting+seen"}},
    // close
    {{{}, "none"}, {{}, "none"}, {{}, "none"}, {{}, "none"}, {{}, "none"}},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(mariadb_wait_pool)

BOOST_AUTO_TEST_CASE(every_name_state_against_every_input)
{
    BOOST_TEST_REQUIRE(table.size() == inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        BOOST_TEST_REQUIRE(table[i].size() == setups.size());
        for (std::size_t s = 0; s < setups.size(); ++s) {
            wait_pool p(1);
            for (auto& f : setups[s].path)
                f(p);
            p.actions().clear();
            bool woken = inputs[i].feed(p);
            auto& want = table[i][s];
            BOOST_TEST_CONTEXT(setups[s].label << " x " << inputs[i].label)
            {
                BOOST_TEST(take(p) == want.actions);
                BOOST_TEST(p.state("n") == want.state);
                BOOST_TEST(woken == want.woken);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(no_connections_no_waits)
{
    wait_pool p(0);
    BOOST_TEST(!p.observe("n", true, 500ms, true));
    BOOST_TEST(p.actions().empty());
    BOOST_TEST(p.state("n") == std::string("none"));
}

BOOST_AUTO_TEST_CASE(the_pool_grows_to_its_bound_and_a_freed_connection_goes_to_the_first_pending_name)
{
    wait_pool p(2);
    p.observe("a", true, 100ms, true);
    p.observe("b", true, 200ms, true);
    BOOST_TEST((take(p) == strings{"open 0", "wait 0 a 1100", "open 1", "wait 1 b 1200"}));
    BOOST_TEST(!p.observe("d", true, 400ms, true));
    BOOST_TEST(!p.observe("c", true, 300ms, true));
    BOOST_TEST(take(p).empty());
    BOOST_TEST(p.connections() == 2u);
    p.on_done(1, wait_end::released, true);
    BOOST_TEST((take(p) == strings{"released b", "wait 1 c 1300"}));  // names in order: c before d
    p.on_done(0, wait_end::timed_out, true);
    BOOST_TEST((take(p) == strings{"wait 0 d 1400"}));
    p.on_done(0, wait_end::released, true);
    p.on_done(0, wait_end::released, true);  // told twice: the second names no wait
    BOOST_TEST((take(p) == strings{"released d"}));
}

BOOST_AUTO_TEST_CASE(after_close_nothing_starts_or_is_told)
{
    wait_pool p(1);
    p.observe("n", true, 100ms, true);
    take(p);
    p.close();
    p.on_done(0, wait_end::released, true);
    BOOST_TEST(!p.observe("n", true, 100ms, true));
    BOOST_TEST(take(p).empty());
}

BOOST_AUTO_TEST_SUITE_END()
