// SPDX-License-Identifier: BSL-1.0
// A latch's node on ZooKeeper without I/O (latch_node.hpp): its data read back as written,
// anything else refused, expiry on the servers' times, and each count-down as Redis's script
// does it (a member once, never past the count, another count refused).
#include "zookeeper/latch_node.hpp"

#include <boost/test/unit_test.hpp>

namespace ln = dlock::zookeeper::latch_node;

BOOST_AUTO_TEST_SUITE(zookeeper_latch_node)

BOOST_AUTO_TEST_CASE(data_reads_back_as_written)
{
    ln::content c{3, 1500, {"a", "with\nnewline", std::string("nul\0byte", 8), "4:tricky"}};
    auto back = ln::decode(ln::encode(c));
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST(back->count == 3u);
    BOOST_TEST(back->ttl_ms == 1500);
    BOOST_TEST(back->members == c.members);
    BOOST_TEST(ln::remaining(*back) == 0u);
}

BOOST_AUTO_TEST_CASE(anything_else_is_not_a_latch)
{
    for (std::string bad :
         {"", "dlock-latch/", "dlock-latch/0/10\n", "dlock-latch/2/0\n", "dlock-latch/2/10", "dlock-latch/2/10\n3:ab\n",
          "dlock-latch/2/10\n0:\n", "dlock-latch/2/10\n2:abc", "dlock-latch/x/10\n", "other", "dlock-latch/2/10\n1:a"})
        BOOST_TEST(!ln::decode(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(expiry_is_judged_on_the_servers_times)
{
    ln::content c{2, 1000, {}};
    BOOST_TEST(!ln::expired(c, 5000, 5999));
    BOOST_TEST(ln::expired(c, 5000, 6000));
    BOOST_TEST(!ln::expired(c, 7000, 6500));  // written after the clock was read: alive
}

BOOST_AUTO_TEST_CASE(count_downs_as_redis_counts_them)
{
    auto first = ln::count_down(std::nullopt, "a", 2, 100);
    BOOST_TEST(!first.mismatch);
    BOOST_TEST(first.remaining == 1u);
    BOOST_TEST(first.next.ttl_ms == 100);
    auto again = ln::count_down(first.next, "a", 2, 900);  // a retry counts once
    BOOST_TEST(again.remaining == 1u);
    BOOST_TEST(again.next.members.size() == 1u);
    BOOST_TEST(again.next.ttl_ms == 100);  // the first count-down's ttl stays
    auto done = ln::count_down(again.next, "b", 2, 100);
    BOOST_TEST(done.remaining == 0u);
    auto past = ln::count_down(done.next, "c", 2, 100);  // never past the count
    BOOST_TEST(past.remaining == 0u);
    BOOST_TEST(past.next.members.size() == 2u);
    auto other = ln::count_down(done.next, "c", 3, 100);
    BOOST_TEST(other.mismatch);
    BOOST_TEST(other.have == 2u);
    auto big = ln::count_down(std::nullopt, std::string(ln::max_data, 'x'), 2, 100);
    BOOST_TEST(big.too_big);
}

BOOST_AUTO_TEST_SUITE_END()
