// SPDX-License-Identifier: BSL-1.0
// The pub/sub channel table without a server: refcounts, pending SUBSCRIBEs, and when a
// confirmation means `ready` or `resync`.
#include "common/channel_table.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

using dlock::detail::channel_table;
using kind = channel_table::confirm_kind;
using ids = std::vector<channel_table::watcher_id>;

namespace {

bool same_set(std::vector<std::string> a, std::vector<std::string> b)
{
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(channel_table_suite)

BOOST_AUTO_TEST_CASE(first_watcher_subscribes_last_unsubscribes)
{
    channel_table t;
    BOOST_TEST(t.add("a", 1));
    BOOST_TEST(!t.add("a", 2));
    BOOST_TEST(t.add("b", 3));
    BOOST_TEST(t.size() == 2u);
    BOOST_TEST(t.pending("a") == 1);
    BOOST_TEST((t.watchers("a") == ids{1, 2}));
    BOOST_TEST(!t.remove("a", 1));
    BOOST_TEST(t.contains("a"));
    BOOST_TEST(t.remove("a", 2));
    BOOST_TEST(!t.contains("a"));
    BOOST_TEST(!t.remove("a", 2));  // unknown: nothing to send
    BOOST_TEST(t.watchers("a").empty());
    BOOST_TEST(t.size() == 1u);
}

BOOST_AUTO_TEST_CASE(first_confirmation_is_ready_and_told_once)
{
    channel_table t;
    t.add("a", 1);
    t.add("a", 2);
    BOOST_TEST(!t.is_confirmed("a"));
    auto c = t.on_confirm("a");
    BOOST_TEST((c.kind == kind::ready));
    BOOST_TEST((c.watchers == ids{1, 2}));
    BOOST_TEST(t.is_confirmed("a"));
    BOOST_TEST(t.pending("a") == 0);
    // A duplicate confirmation tells nobody.
    auto again = t.on_confirm("a");
    BOOST_TEST((again.kind == kind::none));
    BOOST_TEST(again.watchers.empty());
    // Nor does one for a channel nobody watches.
    BOOST_TEST((t.on_confirm("zzz").kind == kind::none));
}

BOOST_AUTO_TEST_CASE(only_the_last_of_several_subscribes_confirms)
{
    channel_table t;
    t.add("a", 1);
    t.on_resubscribe("a");  // sent again before the first was confirmed
    BOOST_TEST(t.pending("a") == 1);
    BOOST_TEST((t.on_confirm("a").kind == kind::ready));
}

BOOST_AUTO_TEST_CASE(disconnect_then_reconfirm_is_resync)
{
    channel_table t;
    t.add("a", 1);
    t.add("b", 2);
    t.on_confirm("a");  // b never confirmed
    auto lost = t.on_disconnect();
    BOOST_TEST(same_set(lost, {"a", "b"}));
    BOOST_TEST(!t.is_confirmed("a"));
    BOOST_TEST(t.pending("a") == 0);
    auto again = t.resubscribe_all();
    BOOST_TEST(same_set(again, {"a", "b"}));
    BOOST_TEST(t.pending("b") == 1);
    auto ca = t.on_confirm("a");
    BOOST_TEST((ca.kind == kind::resync));
    BOOST_TEST((ca.watchers == ids{1}));
    // b was never confirmed before: its first confirmation is still `ready`.
    BOOST_TEST((t.on_confirm("b").kind == kind::ready));
}

BOOST_AUTO_TEST_CASE(moved_channel_is_resync_on_its_new_node)
{
    channel_table t;
    t.add("a", 1);
    t.on_confirm("a");
    t.on_resubscribe("a");  // its slot moved: SSUBSCRIBE on the new master
    BOOST_TEST(!t.is_confirmed("a"));
    BOOST_TEST(t.pending("a") == 1);
    BOOST_TEST((t.on_confirm("a").kind == kind::resync));
}

BOOST_AUTO_TEST_CASE(lost_without_resend_keeps_nothing_pending)
{
    channel_table t;
    t.add("a", 1);
    t.on_lost("a");  // refused before any confirmation
    BOOST_TEST(t.pending("a") == 0);
    t.on_resubscribe("a");
    BOOST_TEST((t.on_confirm("a").kind == kind::ready));  // never confirmed: still the first
    t.on_lost("a");
    t.on_resubscribe("a");
    BOOST_TEST((t.on_confirm("a").kind == kind::resync));
}

BOOST_AUTO_TEST_CASE(a_channel_watched_again_starts_fresh)
{
    channel_table t;
    t.add("a", 1);
    t.on_confirm("a");
    BOOST_TEST(t.remove("a", 1));
    BOOST_TEST(t.add("a", 2));
    BOOST_TEST(!t.is_confirmed("a"));
    BOOST_TEST((t.on_confirm("a").kind == kind::ready));
}

BOOST_AUTO_TEST_SUITE_END()
