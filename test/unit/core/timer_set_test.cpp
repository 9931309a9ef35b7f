// SPDX-License-Identifier: BSL-1.0
// timer_set (src/core/timer_set.*): one Asio timer for every driver's deadline. The drivers
// rely on four things: due order, a disarmed entry never fires, an armed entry keeps its
// owner alive (and nothing else does), and no wait is left once the set is empty.
#include "core/timer_set.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::detail::timer_entry;
using dlock::detail::timer_set;

namespace {

std::vector<std::string> fired;

struct owner {
    std::string name;
    timer_entry entry{
        [](timer_entry&, std::shared_ptr<void> self) { fired.push_back(std::static_pointer_cast<owner>(self)->name); }};
    explicit owner(std::string n) : name(std::move(n)) {}
};

}  // namespace

BOOST_AUTO_TEST_SUITE(timer_set_suite)

BOOST_AUTO_TEST_CASE(fires_in_due_order_and_never_a_disarmed_entry)
{
    fired.clear();
    asio::io_context io;
    timer_set set(io.get_executor());
    auto now = timer_entry::clock::now();
    auto a = std::make_shared<owner>("a"), b = std::make_shared<owner>("b"), c = std::make_shared<owner>("c"),
         d = std::make_shared<owner>("d");
    set.arm(c->entry, now + 30ms, c);
    set.arm(a->entry, now + 10ms, a);  // earlier than the pending wait: the wait moves
    set.arm(b->entry, now + 50ms, b);
    set.arm(b->entry, now + 20ms, b);  // moved while armed
    set.arm(d->entry, now + 15ms, d);
    BOOST_TEST(set.disarm(d->entry) == d);
    BOOST_TEST(!d->entry.armed());
    BOOST_TEST(set.disarm(d->entry) == nullptr);  // twice: nothing
    io.run_for(5s);
    BOOST_TEST(io.stopped());  // ran out of work: no wait left behind
    BOOST_TEST(fired == (std::vector<std::string>{"a", "b", "c"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_armed_entry_keeps_its_owner_and_only_then)
{
    fired.clear();
    asio::io_context io;
    timer_set set(io.get_executor());
    std::weak_ptr<owner> w1, w2;
    {
        auto o1 = std::make_shared<owner>("1"), o2 = std::make_shared<owner>("2");
        w1 = o1;
        w2 = o2;
        set.arm(o1->entry, timer_entry::clock::now() + 1ms, o1);
        set.arm(o2->entry, timer_entry::clock::now() + 1h, o2);
    }
    BOOST_TEST(!w1.expired());
    BOOST_TEST(!w2.expired());
    io.run_one_for(5s);  // the first fires and lets go of its owner
    BOOST_TEST(fired == (std::vector<std::string>{"1"}), boost::test_tools::per_element());
    BOOST_TEST(w1.expired());
    BOOST_TEST(!w2.expired());
    set.disarm(w2.lock()->entry);  // the returned reference is dropped here
    BOOST_TEST(w2.expired());
    io.run_for(5s);
    BOOST_TEST(io.stopped());  // the hour-long wait was cancelled with its last entry
}

BOOST_AUTO_TEST_CASE(an_owner_may_rearm_itself_and_others_when_due)
{
    fired.clear();
    asio::io_context io;
    timer_set set(io.get_executor());
    struct chain {
        timer_set* set;
        int left = 3;
        timer_entry entry{[](timer_entry& e, std::shared_ptr<void> self) {
            auto c = std::static_pointer_cast<chain>(self);
            fired.push_back(std::to_string(c->left));
            if (--c->left > 0)
                c->set->arm(e, timer_entry::clock::now() + 1ms, c);
        }};
    };
    auto c = std::make_shared<chain>();
    c->set = &set;
    std::weak_ptr<chain> w = c;
    auto& entry = c->entry;
    set.arm(entry, timer_entry::clock::now(), std::move(c));
    io.run_for(5s);
    BOOST_TEST(io.stopped());
    BOOST_TEST(fired == (std::vector<std::string>{"3", "2", "1"}), boost::test_tools::per_element());
    BOOST_TEST(w.expired());
}

// An owner that re-arms itself for a time already past must not keep the others (I/O, other
// handlers) from running: each pass fires only what was due when its wait ended.
BOOST_AUTO_TEST_CASE(rearming_for_the_past_lets_other_handlers_run)
{
    fired.clear();
    asio::io_context io;
    timer_set set(io.get_executor());
    struct again {
        timer_set* set;
        asio::io_context* io;
        int count = 0;
        int count_when_posted_ran = -1;
        timer_entry entry{[](timer_entry& e, std::shared_ptr<void> self) {
            auto a = std::static_pointer_cast<again>(self);
            if (++a->count == 1)  // another handler, queued behind this pass
                asio::post(*a->io, [a] { a->count_when_posted_ran = a->count; });
            // Bounded, so that a regression fails rather than hangs.
            if (a->count < 1000 && a->count_when_posted_ran < 0)
                a->set->arm(e, timer_entry::clock::now() - 1ms, a);
        }};
    };
    auto a = std::make_shared<again>();
    a->set = &set;
    a->io = &io;
    auto& entry = a->entry;
    set.arm(entry, timer_entry::clock::now(), a);
    io.run_for(5s);
    BOOST_TEST(io.stopped());
    BOOST_TEST(a->count_when_posted_ran >= 1);
    BOOST_TEST(a->count_when_posted_ran < 10);  // one pass, one firing of the entry
    BOOST_TEST(!entry.armed());
}

// As a driver holds its registry (and so the set): while an entry is armed the set must not
// own its state, or owner -> set -> state -> entry -> owner would outlive the io_context.
BOOST_AUTO_TEST_CASE(an_io_context_destroyed_with_armed_entries_frees_their_owners)
{
    fired.clear();
    struct holder {
        std::shared_ptr<timer_set> set;
        timer_entry entry{[](timer_entry&, std::shared_ptr<void>) { fired.push_back("held"); }};
    };
    std::weak_ptr<holder> w;
    std::weak_ptr<timer_set> ws;
    {
        asio::io_context io;
        auto set = std::make_shared<timer_set>(io.get_executor());
        ws = set;
        auto h = std::make_shared<holder>();
        h->set = std::move(set);
        w = h;
        // Armed, disarmed (the set keeps its state while idle), armed again.
        auto& entry = h->entry;
        h->set->arm(entry, timer_entry::clock::now() + 1h, h);
        h->set->disarm(entry);
        h->set->arm(entry, timer_entry::clock::now() + 1h, std::move(h));
        asio::post(io, [] {});
        io.run_one();
        BOOST_TEST(!w.expired());
    }
    BOOST_TEST(w.expired());  // as the owner's own pending wait would have been
    BOOST_TEST(ws.expired());
    BOOST_TEST(fired.empty());
}

// A callback that throws leaves io_context::run, as any handler's exception does; the other
// armed entries must still fire (for a driver: its lease still renewed).
BOOST_AUTO_TEST_CASE(a_throwing_callback_leaves_the_others_armed)
{
    fired.clear();
    asio::io_context io;
    timer_set set(io.get_executor());
    struct thrower {
        timer_entry entry{[](timer_entry&, std::shared_ptr<void>) { throw std::runtime_error("user code"); }};
    };
    auto t = std::make_shared<thrower>();
    auto later = std::make_shared<owner>("later");
    auto now = timer_entry::clock::now();
    auto& te = t->entry;
    set.arm(te, now, std::move(t));
    set.arm(later->entry, now + 20ms, later);
    BOOST_CHECK_THROW(io.run_for(5s), std::runtime_error);
    io.restart();
    io.run_for(5s);
    BOOST_TEST(io.stopped());
    BOOST_TEST(fired == (std::vector<std::string>{"later"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
