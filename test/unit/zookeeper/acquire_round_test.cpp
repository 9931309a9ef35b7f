// SPDX-License-Identifier: BSL-1.0
// The ZooKeeper store's acquire judgement (src/zookeeper/acquire_round.hpp): the step after
// one round of replies, for each input that can happen, and properties over every input.
#include "zookeeper/acquire_round.hpp"

#include <boost/test/unit_test.hpp>

#include <ostream>

using dlock::zookeeper::acquire_next;
using dlock::zookeeper::acquire_round;
using dlock::zookeeper::judge;
using dlock::zookeeper::reply;

namespace dlock::zookeeper {
std::ostream& operator<<(std::ostream& o, acquire_next n)
{
    return o << static_cast<int>(n);
}
}  // namespace dlock::zookeeper

namespace {

// Our node made this round, first among the contenders, its czxid known.
acquire_round first_made()
{
    acquire_round r;
    r.create = reply::ok;
    r.czxid_known = true;
    r.pos.found = true;
    r.pos.first = true;
    r.pos.node = "_c_g-lock-0000000001";
    return r;
}
acquire_round behind(bool queue)
{
    auto r = first_made();
    r.pos.first = false;
    r.pos.predecessor = "_c_h-lock-0000000000";
    r.queue = queue;
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zookeeper_acquire)

BOOST_AUTO_TEST_CASE(each_step)
{
    BOOST_TEST(judge(first_made()) == acquire_next::held);
    BOOST_TEST(judge(behind(true)) == acquire_next::queued);
    BOOST_TEST(judge(behind(false)) == acquire_next::withdraw);
    // our node was known: no create this round
    auto known = first_made();
    known.create = reply::not_sent;
    BOOST_TEST(judge(known) == acquire_next::held);
    // closed, whatever else came
    auto r = first_made();
    r.closed = true;
    r.same_session = false;
    BOOST_TEST(judge(r) == acquire_next::fail_closed);
    // the session went while we asked: once more, then an error
    r = first_made();
    r.same_session = false;
    BOOST_TEST(judge(r) == acquire_next::start_over);
    r.retried = true;
    BOOST_TEST(judge(r) == acquire_next::fail_session_lost);
    // no lock path: made once, then the create's error
    r = first_made();
    r.create = reply::no_node;
    BOOST_TEST(judge(r) == acquire_next::make_parents);
    r.parents_made = true;
    BOOST_TEST(judge(r) == acquire_next::fail_create);
    // a create that may have run: remembered, even though the children show a node
    r = first_made();
    r.create = reply::lost;
    BOOST_TEST(judge(r) == acquire_next::fail_create_uncertain);
    r.create = reply::failed;
    BOOST_TEST(judge(r) == acquire_next::fail_create);
    // the children's errors
    for (auto c : {reply::lost, reply::failed, reply::no_node, reply::not_sent}) {
        r = first_made();
        r.children = c;
        BOOST_TEST(judge(r) == acquire_next::fail_children);
    }
    // no node of ours among the children: deleted under us
    r = first_made();
    r.pos = {};
    BOOST_TEST(judge(r) == acquire_next::gone);
    r.create = reply::not_sent;
    BOOST_TEST(judge(r) == acquire_next::gone);
    // found by its guid alone: its owner checked first, first or not
    for (bool first : {true, false}) {
        r = first_made();
        r.create = reply::not_sent;
        r.czxid_known = false;
        r.pos.first = first;
        BOOST_TEST(judge(r) == acquire_next::check_owner);
    }
    // another kind of lock before ours (a mutex node before a reader): withdrawn and refused,
    // queued or not, first or not
    for (bool queue : {true, false}) {
        r = behind(queue);
        r.pos.foreign = true;
        BOOST_TEST(judge(r) == acquire_next::mismatch);
        r.pos.first = true;
        BOOST_TEST(judge(r) == acquire_next::mismatch);
    }
}

// Over every input: the lock is granted only on the whole evidence and never past another
// kind of lock, a create that may have run is never forgotten, and a node is withdrawn only
// by a try that is not first.
BOOST_AUTO_TEST_CASE(properties_over_every_input)
{
    const reply replies[] = {reply::ok, reply::not_sent, reply::no_node, reply::lost, reply::failed};
    int cases = 0;
    for (int bits = 0; bits < (1 << 9); ++bits)
        for (auto create : replies)
            for (auto children : replies) {
                acquire_round r;
                r.closed = bits & 1;
                r.same_session = bits & 2;
                r.retried = bits & 4;
                r.parents_made = bits & 8;
                r.queue = bits & 16;
                r.czxid_known = bits & 32;
                r.pos.found = bits & 64;
                r.pos.first = (bits & 128) && r.pos.found;
                r.pos.foreign = (bits & 256) && r.pos.found;
                r.create = create;
                r.children = children;
                auto next = judge(r);
                ++cases;
                bool answered = !r.closed && r.same_session && (create == reply::ok || create == reply::not_sent) &&
                                children == reply::ok;
                BOOST_TEST((next == acquire_next::held) ==
                           (answered && r.pos.found && r.pos.first && r.czxid_known && !r.pos.foreign));
                if (next == acquire_next::mismatch)  // only on our own node's whole evidence
                    BOOST_TEST((answered && r.pos.found && r.czxid_known && r.pos.foreign));
                if (r.closed)
                    BOOST_TEST(next == acquire_next::fail_closed);
                if (!r.closed && r.same_session && create == reply::lost)
                    BOOST_TEST(next == acquire_next::fail_create_uncertain);
                if (next == acquire_next::withdraw)
                    BOOST_TEST((!r.queue && !r.pos.first && answered));
                if (next == acquire_next::queued)
                    BOOST_TEST((r.queue && !r.pos.first && answered));
                if (next == acquire_next::start_over)
                    BOOST_TEST(!r.retried);
            }
    BOOST_TEST(cases == 512 * 25);
}

BOOST_AUTO_TEST_SUITE_END()
