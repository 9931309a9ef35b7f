// SPDX-License-Identifier: BSL-1.0
// A semaphore on ZooKeeper without I/O: the lease nodes' names (semaphore_layout.hpp) and the
// judgement after a round of the lease phase (permit_round.hpp), for each input that can happen.
#include "zookeeper/permit_round.hpp"
#include "zookeeper/recipe.hpp"

#include <boost/test/unit_test.hpp>

#include <ostream>

using dlock::zookeeper::permit_next;
using dlock::zookeeper::permit_round;
using dlock::zookeeper::reply;
namespace layout = dlock::zookeeper::semaphore_layout;

namespace dlock::zookeeper {
std::ostream& operator<<(std::ostream& o, permit_next n)
{
    return o << static_cast<int>(n);
}
}  // namespace dlock::zookeeper

namespace {

// Our lease node made this round, one of `count` leases of a semaphore of 2.
permit_round made(std::size_t count)
{
    permit_round r;
    r.permits = 2;
    r.create = reply::ok;
    r.czxid_known = true;
    r.count.count = count;
    r.count.found = true;
    r.count.node = "_c_g-lease-of2-0000000003";
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zookeeper_semaphore)

BOOST_AUTO_TEST_CASE(lease_names_carry_the_permits_and_curators_do_not)
{
    auto prefix = layout::lease_prefix("tok", 7, 3);
    BOOST_TEST(prefix.rfind("_c_" + dlock::zookeeper::recipe::guid_of("tok", 7) + "-lease-of3-", 0) == 0u);
    BOOST_TEST(layout::permits_of(prefix + "0000000012").value_or(0) == 3u);
    // Curator's own lease node, and names that only look alike.
    BOOST_TEST(!layout::permits_of("_c_0f0e0d0c-0000-0000-0000-000000000000-lease-0000000012"));
    BOOST_TEST(!layout::permits_of("_c_x-lease-of-0000000012"));
    BOOST_TEST(!layout::permits_of("_c_x-lease-of3"));
    BOOST_TEST(!layout::permits_of("_c_x-lease-ofx-0000000012"));
    BOOST_TEST(!dlock::zookeeper::recipe::parse_contender(prefix + "0000000012"), "a lease is no lock contender");
}

BOOST_AUTO_TEST_CASE(counting_finds_ours_counts_everyone_and_names_another_number)
{
    std::vector<std::string> children{layout::lease_prefix("a", 1, 2) + "0000000001",
                                      "_c_0f0e0d0c-0000-0000-0000-000000000000-lease-0000000002",
                                      layout::lease_prefix("b", 1, 2) + "0000000003"};
    auto c = layout::count_leases(children, "b", 1, 2);
    BOOST_TEST(c.count == 3u);
    BOOST_TEST(c.found);
    BOOST_TEST(c.node == children[2]);
    BOOST_TEST(!c.other_permits);
    // Another session of the same token is not ours; another number is named.
    BOOST_TEST(!layout::count_leases(children, "b", 2, 2).found);
    BOOST_TEST(layout::count_leases(children, "b", 1, 5).other_permits.value_or(0) == 2u);
    BOOST_TEST(layout::has_semaphore({"locks"}));
    BOOST_TEST(layout::has_semaphore({"_c_x-lock-0000000001", "leases"}));
    BOOST_TEST(!layout::has_semaphore({"_c_x-lock-0000000001"}));
}

BOOST_AUTO_TEST_CASE(each_step)
{
    BOOST_TEST(judge(made(1)) == permit_next::granted);
    BOOST_TEST(judge(made(2)) == permit_next::granted);  // ours is the second of 2
    auto full = made(3);
    BOOST_TEST(judge(full) == permit_next::withdraw);
    full.queue = true;
    BOOST_TEST(judge(full) == permit_next::wait);
    auto known = made(1);
    known.create = reply::not_sent;
    BOOST_TEST(judge(known) == permit_next::granted);
    auto r = made(1);
    r.foreign = true;
    BOOST_TEST(judge(r) == permit_next::mismatch);
    r = made(1);
    r.count.other_permits = 3;
    BOOST_TEST(judge(r) == permit_next::mismatch);
    r = made(1);
    r.count.found = false;
    BOOST_TEST(judge(r) == permit_next::gone);
    r = made(1);
    r.czxid_known = false;
    BOOST_TEST(judge(r) == permit_next::check_owner);
    r = made(1);
    r.create = reply::no_node;
    BOOST_TEST(judge(r) == permit_next::make_parents);
    r.parents_made = true;
    BOOST_TEST(judge(r) == permit_next::fail_create);
    r = made(1);
    r.create = reply::lost;
    BOOST_TEST(judge(r) == permit_next::fail_create_uncertain);
    r = made(1);
    r.leases = reply::lost;
    BOOST_TEST(judge(r) == permit_next::fail_children);
    r = made(1);
    r.path = reply::failed;
    BOOST_TEST(judge(r) == permit_next::fail_children);
}

BOOST_AUTO_TEST_CASE(the_store_and_session_come_first)
{
    auto r = made(1);
    r.closed = true;
    r.same_session = false;
    BOOST_TEST(judge(r) == permit_next::fail_closed);
    r.closed = false;
    BOOST_TEST(judge(r) == permit_next::start_over);
    r.retried = true;
    BOOST_TEST(judge(r) == permit_next::fail_session_lost);
}

// Over every combination: a permit only with ours found, known, no mismatch and room for it.
BOOST_AUTO_TEST_CASE(a_permit_only_with_room_for_it)
{
    for (int bits = 0; bits < 256; ++bits)
        for (std::size_t count = 0; count < 5; ++count) {
            permit_round r;
            r.permits = 2;
            r.closed = bits & 1;
            r.same_session = !(bits & 2);
            r.queue = bits & 4;
            r.foreign = bits & 8;
            r.czxid_known = bits & 16;
            r.count.found = bits & 32;
            r.create = bits & 64 ? reply::ok : reply::lost;
            r.leases = bits & 128 ? reply::ok : reply::failed;
            r.count.count = count;
            bool granted = judge(r) == permit_next::granted;
            bool may = !r.closed && r.same_session && !r.foreign && r.czxid_known && r.count.found &&
                       r.create == reply::ok && r.leases == reply::ok && count <= 2;
            BOOST_TEST(granted == may, "bits " << bits << " count " << count);
            if (judge(r) == permit_next::wait)
                BOOST_TEST(r.queue);
        }
}

BOOST_AUTO_TEST_SUITE_END()
