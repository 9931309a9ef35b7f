// SPDX-License-Identifier: BSL-1.0
// ZooKeeper's lock recipe without a server: Curator's node names, ordering by sequence,
// where a token stands, lock paths, URLs.
#include <dlock/error.hpp>
#include <dlock/zookeeper/config.hpp>

#include "zookeeper/recipe.hpp"

#include <boost/test/unit_test.hpp>

namespace recipe = dlock::zookeeper::recipe;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(zookeeper_recipe)

BOOST_AUTO_TEST_CASE(node_names_follow_curators_layout)
{
    auto g = recipe::guid_of("0123456789abcdef:42:7", 0x10000a1);
    BOOST_TEST(g.size() == 36u);
    BOOST_TEST(g[8] == '-');
    BOOST_TEST(g[13] == '-');
    BOOST_TEST(g[18] == '-');
    BOOST_TEST(g[23] == '-');
    BOOST_TEST(g == recipe::guid_of("0123456789abcdef:42:7", 0x10000a1));  // the same token finds its node again
    BOOST_TEST(g != recipe::guid_of("0123456789abcdef:42:8", 0x10000a1));
    BOOST_TEST(recipe::node_prefix("t", 5) == "_c_" + recipe::guid_of("t", 5) + "-lock-");
}

BOOST_AUTO_TEST_CASE(sequences_and_order)
{
    BOOST_TEST(*recipe::sequence_of("_c_8e5f6c1a-0000-4000-8000-000000000000-lock-0000000012") == 12);
    BOOST_TEST(*recipe::sequence_of("lock-0000000000") == 0);  // Curator without protection
    BOOST_TEST(!recipe::sequence_of("leases"));
    BOOST_TEST(!recipe::sequence_of("_c_x-lock-"));
    BOOST_TEST(!recipe::sequence_of("_c_x-lock-12a"));
    // Ordered by sequence, not by name (the guids sort anyhow); other children ignored.
    auto a = recipe::node_prefix("a", 1) + "0000000010";
    auto b = recipe::node_prefix("b", 1) + "0000000002";
    auto c = "_c_ffffffff-ffff-ffff-ffff-ffffffffffff-lock-0000000005";  // a Curator client
    auto sorted = recipe::contenders({a, "junk", b, c});
    BOOST_REQUIRE(sorted.size() == 3u);
    BOOST_TEST(sorted[0] == b);
    BOOST_TEST(sorted[1] == c);
    BOOST_TEST(sorted[2] == a);
    auto pa = recipe::find(sorted, "a", 1);
    BOOST_TEST(pa.found);
    BOOST_TEST(!pa.first);
    BOOST_TEST(pa.predecessor == c);  // a waiter watches the node just before its own
    auto pb = recipe::find(sorted, "b", 1);
    BOOST_TEST(pb.first);
    BOOST_TEST(pb.predecessor.empty());
    BOOST_TEST(!recipe::find(sorted, "z", 1).found);
}

// Issue 29: a store that gave its session up queues the same token again in a new session,
// while the old session's node may live on at the servers until they expire it. That node
// is not the new session's: found as its own, it handed the lock to two holders at once.
BOOST_AUTO_TEST_CASE(a_node_of_a_session_given_up_is_not_found_by_a_new_one)
{
    const std::int64_t old_session = 0x1000001a2b30000, new_session = 0x1000001a2b30001;
    BOOST_TEST(recipe::guid_of("tok", old_session) != recipe::guid_of("tok", new_session));
    auto stale = recipe::node_prefix("tok", old_session) + "0000000001";
    auto other = recipe::node_prefix("other", 7) + "0000000002";
    auto mine = recipe::node_prefix("tok", new_session) + "0000000003";
    auto sorted = recipe::contenders({mine, other, stale});
    auto p = recipe::find(sorted, "tok", new_session);
    BOOST_TEST(p.found);
    BOOST_TEST(p.node == mine);
    BOOST_TEST(!p.first);  // the stale node and the other waiter come first
    BOOST_TEST(p.predecessor == other);
    BOOST_TEST(!recipe::find({other, stale}, "tok", new_session).found);  // not yet created here
}

// Curator's InterProcessReadWriteLock: `__READ__` and `__WRIT__` nodes under one path, ordered
// by their sequence alone; a writer waits for the node before its own, a reader for the
// first writer before it, so readers in a row hold together and a queued writer is not passed.
BOOST_AUTO_TEST_CASE(read_write_layout)
{
    using kind = recipe::node_kind;
    BOOST_TEST(recipe::node_prefix("t", 5, kind::read) == "_c_" + recipe::guid_of("t", 5) + "-__READ__");
    BOOST_TEST(recipe::node_prefix("t", 5, kind::write) == "_c_" + recipe::guid_of("t", 5) + "-__WRIT__");
    auto c = recipe::parse_contender("_c_0b1c2d3e-0000-4000-8000-000000000000-__WRIT__0000000007");
    BOOST_REQUIRE(c.has_value());
    BOOST_TEST((c->kind == kind::write));
    BOOST_TEST(c->sequence == 7);
    BOOST_TEST(*recipe::sequence_of("__READ__0000000003") == 3);  // Curator without protection
    BOOST_TEST(!recipe::parse_contender("_c_x-__READ__"));
    BOOST_TEST(!recipe::parse_contender("_c_x-__WRIT__1x"));

    auto r1 = recipe::node_prefix("r1", 1, kind::read) + "0000000001";
    auto r2 = "_c_ffffffff-ffff-ffff-ffff-ffffffffffff-__READ__0000000002";  // a Curator reader
    auto w3 = recipe::node_prefix("w3", 1, kind::write) + "0000000003";
    auto r4 = recipe::node_prefix("r4", 1, kind::read) + "0000000004";
    auto w5 = "_c_eeeeeeee-ffff-ffff-ffff-ffffffffffff-__WRIT__0000000005";
    auto r6 = recipe::node_prefix("r6", 1, kind::read) + "0000000006";
    auto sorted = recipe::contenders({r6, w5, r4, w3, r2, r1});  // the sequence orders, not the name
    BOOST_REQUIRE(sorted.size() == 6u);
    BOOST_TEST(sorted[0] == r1);
    BOOST_TEST(sorted[5] == r6);
    BOOST_TEST((recipe::family_of(sorted) == recipe::path_family::read_write));
    auto p1 = recipe::find(sorted, "r1", 1);
    BOOST_TEST(p1.first);
    BOOST_TEST((p1.kind == kind::read));
    BOOST_TEST(!p1.foreign);
    auto p3 = recipe::find(sorted, "w3", 1);
    BOOST_TEST(!p3.first);  // behind two readers
    BOOST_TEST(p3.predecessor == r2);
    auto p4 = recipe::find(sorted, "r4", 1);
    BOOST_TEST(!p4.first);  // a queued writer is not passed by a later reader
    BOOST_TEST(p4.predecessor == w3);
    auto p6 = recipe::find(sorted, "r6", 1);
    BOOST_TEST(p6.predecessor == w3);  // the first writer before it, as Curator's reader watches
    auto held = recipe::holders(sorted);
    BOOST_REQUIRE(held.size() == 2u);  // the readers in a row at the head hold together
    BOOST_TEST(held[1] == r2);
    // Once the first two readers go, the writer holds alone.
    std::vector<std::string> later(sorted.begin() + 2, sorted.end());
    BOOST_TEST(recipe::find(later, "w3", 1).first);
    BOOST_TEST(recipe::holders(later) == std::vector<std::string>{w3});
    BOOST_TEST((recipe::family_of(std::vector<std::string>{}) == recipe::path_family::empty));
    // Who is waited for (a renewal's `contended`): readers ahead of a writer, the writer
    // ahead of anyone; the last reader is waited for by nobody.
    BOOST_TEST(recipe::waited_for(sorted, r1));
    BOOST_TEST(recipe::waited_for(sorted, w3));
    BOOST_TEST(!recipe::waited_for(sorted, r6));
    BOOST_TEST(!recipe::waited_for({r1, r2}, r1));
    BOOST_TEST(recipe::waited_for({w3, r4}, w3));
    BOOST_TEST(!recipe::waited_for({w3}, w3));
    BOOST_TEST(!recipe::waited_for(sorted, "gone"));
}

// One name, one kind: a path that has a mutex's nodes is no read-write lock, and the other
// way round; only the node that came later is told (the earlier one holds or waits as before).
BOOST_AUTO_TEST_CASE(another_kind_before_ours_is_foreign)
{
    using kind = recipe::node_kind;
    auto m1 = recipe::node_prefix("m", 1, kind::lock) + "0000000001";
    auto r2 = recipe::node_prefix("r", 1, kind::read) + "0000000002";
    auto m3 = recipe::node_prefix("n", 1, kind::lock) + "0000000003";
    auto sorted = recipe::contenders({m3, r2, m1});
    BOOST_TEST((recipe::family_of(sorted) == recipe::path_family::mixed));
    BOOST_TEST(!recipe::find(sorted, "m", 1).foreign);
    BOOST_TEST(recipe::find(sorted, "r", 1).foreign);
    BOOST_TEST(recipe::find(sorted, "n", 1).foreign);
    BOOST_TEST(recipe::holders(sorted) == std::vector<std::string>{m1});
    BOOST_TEST((recipe::find(sorted, "r", 1).foreign_kind == kind::lock));  // what the path is in use as
    // A node found by its guid is found whatever its kind (a lost create's reply).
    BOOST_TEST(recipe::find(sorted, "r", 1).node == r2);
    // An election's candidates are a family of their own.
    auto c4 = recipe::node_prefix("c", 1, kind::latch) + "0000000004";
    BOOST_TEST(recipe::find(recipe::contenders({c4, m1}), "c", 1).foreign);
    BOOST_TEST((recipe::find(recipe::contenders({c4, m3}), "c", 1).foreign_kind == kind::lock));
    BOOST_TEST(!recipe::find(recipe::contenders({c4, m3}), "n", 1).foreign);  // the earlier keeps the path
}

// Curator's LeaderLatch: `_c_<guid>-latch-<sequence>` candidates, the lowest leads, each
// watches the one before it; the path is an election's.
BOOST_AUTO_TEST_CASE(leader_latch_layout)
{
    using kind = recipe::node_kind;
    BOOST_TEST(recipe::node_prefix("t", 5, kind::latch) == "_c_" + recipe::guid_of("t", 5) + "-latch-");
    auto c = recipe::parse_contender("_c_0b1c2d3e-0000-4000-8000-000000000000-latch-0000000011");
    BOOST_REQUIRE(c.has_value());
    BOOST_TEST((c->kind == kind::latch));
    BOOST_TEST(c->sequence == 11);
    auto java = "_c_0b1c2d3e-0000-4000-8000-000000000000-latch-0000000001";  // a Curator candidate
    auto ours = recipe::node_prefix("me", 3, kind::latch) + "0000000002";
    auto later = recipe::node_prefix("you", 3, kind::latch) + "0000000003";
    auto sorted = recipe::contenders({later, ours, java});
    BOOST_TEST((recipe::family_of(sorted) == recipe::path_family::election));
    auto p = recipe::find(sorted, "me", 3);
    BOOST_TEST(!p.first);
    BOOST_TEST(!p.foreign);
    BOOST_TEST(p.predecessor == java);
    BOOST_TEST(recipe::holders(sorted) == std::vector<std::string>{java});
    BOOST_TEST(recipe::waited_for(sorted, ours));
    BOOST_TEST(recipe::find(std::vector<std::string>(sorted.begin() + 1, sorted.end()), "me", 3).first);
}

BOOST_AUTO_TEST_CASE(lock_paths)
{
    std::string why;
    BOOST_TEST(recipe::lock_path("/dlock", "orders:42", why) == "/dlock/orders:42");
    BOOST_TEST(recipe::lock_path("/", "x", why) == "/x");
    BOOST_TEST(recipe::lock_path("/dlock", "a/b", why) == "/dlock/a/b");
    for (std::string bad : {std::string(), std::string("a//b"), std::string("a/"), std::string(".."),
                            std::string("a\nb"), std::string("a\0b", 3)}) {
        BOOST_TEST(recipe::lock_path("/dlock", bad, why).empty(), bad);
        BOOST_TEST(!why.empty());
    }
}

BOOST_AUTO_TEST_CASE(urls)
{
    dlock::zookeeper::config c;
    dlock::zookeeper::config_error err;
    BOOST_TEST(
        dlock::zookeeper::parse_url("zk://a:1,b,[::1]:3/app?root=/locks&session_timeout=3s&connect_timeout=1s", c, err),
        err.message);
    BOOST_REQUIRE(c.servers.size() == 3u);
    BOOST_TEST(c.servers[1].port == 2181);
    BOOST_TEST(c.servers[2].host == "::1");
    BOOST_TEST(c.chroot == "/app");
    BOOST_TEST(c.root == "/locks");
    BOOST_TEST(c.session_timeout.count() == 3000);
    BOOST_TEST(c.connect_timeout.count() == 1000);
    BOOST_TEST(dlock::zookeeper::to_url(c) == "zk://a:1,b:2181,[::1]:3/app");
    struct bad_case {
        const char* url;
        dlock::error code;
    };
    for (auto b :
         {bad_case{"redis://a", dlock::error::unsupported_scheme}, bad_case{"zk://", dlock::error::invalid_url},
          bad_case{"zk://a:0", dlock::error::invalid_port}, bad_case{"zk://a,a", dlock::error::invalid_url},
          bad_case{"zk://a/b/", dlock::error::invalid_url}, bad_case{"zk://a?root=x", dlock::error::invalid_option},
          bad_case{"zk://a?session_timeout=soon", dlock::error::invalid_duration},
          bad_case{"zk://a?color=red", dlock::error::invalid_option}, bad_case{"a:1", dlock::error::invalid_url}}) {
        dlock::zookeeper::config_error e;
        BOOST_TEST(!dlock::zookeeper::parse_url(b.url, c, e), b.url);
        BOOST_TEST((e.code == make_error_code(b.code)), b.url << ": " << e.message);
        BOOST_TEST(!e.message.empty());
    }
}

BOOST_AUTO_TEST_SUITE_END()
