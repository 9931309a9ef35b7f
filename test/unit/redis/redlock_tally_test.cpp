// SPDX-License-Identifier: BSL-1.0
// Redlock's vote (src/redis/redlock_tally.hpp) for every reply count on 1 to 9 nodes,
// against what the outstanding replies could still bring.
#include "redis/redlock_tally.hpp"

#include <boost/test/unit_test.hpp>

using dlock::redis::tally;
using dlock::redis::vote;

namespace {

// Whether some way of answering the outstanding replies (each yes, no or a failure) ends
// with a yes majority, or with so many noes that yes can never reach one.
struct reachable {
    bool yes = false, no = false;
};
reachable reach(std::size_t n, std::size_t yes, std::size_t no, std::size_t outstanding)
{
    const std::size_t q = n / 2 + 1;
    reachable r;
    for (std::size_t y = 0; y <= outstanding; ++y)
        for (std::size_t m = 0; y + m <= outstanding; ++m) {
            r.yes = r.yes || yes + y >= q;
            r.no = r.no || no + m > n - q;
        }
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redlock_tally)

BOOST_AUTO_TEST_CASE(every_count_on_one_to_nine_nodes)
{
    std::size_t cases = 0;
    for (std::size_t n = 1; n <= 9; ++n) {
        const std::size_t q = n / 2 + 1;
        for (std::size_t yes = 0; yes <= n; ++yes)
            for (std::size_t no = 0; yes + no <= n; ++no)
                for (std::size_t out = 0; yes + no + out <= n; ++out) {
                    ++cases;
                    const auto v = tally(n, yes, no, out);
                    const auto r = reach(n, yes, no, out);
                    BOOST_TEST_CONTEXT("n=" << n << " yes=" << yes << " no=" << no << " outstanding=" << out)
                    {
                        BOOST_TEST((v == vote::yes) == (yes >= q));                // a majority said yes
                        BOOST_TEST((v == vote::no) == (yes < q && no > n - q));    // too many said no
                        if (v == vote::pending)                                     // something is left to decide
                            BOOST_TEST((r.yes || r.no));
                        if (v == vote::no_quorum)                                   // nothing left to decide
                            BOOST_TEST((!r.yes && !r.no));
                        // A reply never turns a decided vote into another decided vote.
                        if (v != vote::pending && out > 0) {
                            BOOST_TEST((tally(n, yes + 1, no, out - 1) == v));
                            BOOST_TEST((tally(n, yes, no + 1, out - 1) == v));
                            BOOST_TEST((tally(n, yes, no, out - 1) == v));
                        }
                    }
                }
    }
    BOOST_TEST(cases == 714u);  // C(13,4) - 1: the counts with yes + no + outstanding <= n
}

BOOST_AUTO_TEST_CASE(five_nodes_as_the_redlock_paper_counts)
{
    BOOST_TEST((tally(5, 3, 0, 2) == vote::yes));
    BOOST_TEST((tally(5, 2, 0, 3) == vote::pending));
    BOOST_TEST((tally(5, 2, 3, 0) == vote::no));
    BOOST_TEST((tally(5, 2, 1, 0) == vote::no_quorum));  // two nodes failed, 2 of 5 is no majority
    BOOST_TEST((tally(5, 0, 0, 0) == vote::no_quorum));
}

BOOST_AUTO_TEST_SUITE_END()
