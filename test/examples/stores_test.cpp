// SPDX-License-Identifier: BSL-1.0
// lock_any_store, the same program on each store: one test case per store, each on a throwaway
// server of its own (one ctest entry per store: examples_store_<store>).
#include "common/etcd_cluster.hpp"
#include "common/redis_server.hpp"
#include "common/zk_ensemble.hpp"
#include "run_example.hpp"
#ifdef DLOCK_HAS_MARIADB
#include "common/mariadb_server.hpp"
#endif
#ifdef DLOCK_HAS_MEMCACHED
#include "common/memcached_server.hpp"
#endif
#ifdef DLOCK_HAS_POSTGRES
#include "common/postgres_server.hpp"
#endif

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

using namespace std::chrono_literals;

namespace {

using outcome = dlock::test::example_run;

outcome run_example(const std::string& url)
{
    return dlock::test::run_example({DLOCK_EXAMPLE_LOCK_ANY_STORE, url});
}

// The token at the end of the line that starts with `prefix`; 0 if there is none.
std::uint64_t token_after(const outcome& o, const std::string& prefix)
{
    for (auto& l : o.lines)
        if (l.rfind(prefix, 0) == 0)
            return std::stoull(l.substr(l.rfind(' ') + 1));
    return 0;
}

// The example's own checks passed (exit 0, "ok"), and what it printed agrees.
void passes_on(const std::string& url, const std::string& store_word)
{
    auto o = run_example(url);
    BOOST_TEST_INFO("output:\n" << o.text());
    BOOST_TEST(o.status == 0);
    BOOST_REQUIRE(!o.lines.empty());
    BOOST_TEST(o.lines.front().rfind("store: " + store_word + " ", 0) == 0u);  // the URL picked this store
    BOOST_TEST(o.lines.back() == "ok");
    auto first = token_after(o, "first holds orders:42 with fencing token ");
    auto second = token_after(o, "second holds orders:42 with fencing token ");
    BOOST_TEST(first > 0u);
    BOOST_TEST(second > first);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lock_any_store)

BOOST_AUTO_TEST_CASE(redis)
{
    dlock::test::redis_server srv;
    passes_on(srv.url(), "redis");
}

#ifdef DLOCK_HAS_ETCD
BOOST_AUTO_TEST_CASE(etcd)
{
    dlock::test::etcd_cluster c(1);
    passes_on(c.url(), "etcd");
}
#endif

#ifdef DLOCK_HAS_ZOOKEEPER
BOOST_AUTO_TEST_CASE(zookeeper)
{
    dlock::test::zk_ensemble z(1);
    passes_on(z.url(), "zookeeper");
}
#endif

#ifdef DLOCK_HAS_POSTGRES
BOOST_AUTO_TEST_CASE(postgres)
{
    dlock::test::postgres_server pg;
    passes_on(pg.url(), "postgresql");
}
#endif

#ifdef DLOCK_HAS_MARIADB
BOOST_AUTO_TEST_CASE(mariadb)
{
    dlock::test::mariadb_server db;
    passes_on(db.url(), "mariadb");
}
#endif

#ifdef DLOCK_HAS_MEMCACHED
BOOST_AUTO_TEST_CASE(memcached)
{
    dlock::test::memcached_server mc;
    passes_on(mc.url(), "memcached");
}
#endif

// A URL no store takes, or a store's URL that is wrong: one line on stderr, exit 2, no output.
BOOST_AUTO_TEST_CASE(bad_urls_exit_2)
{
    for (std::string url : {"http://127.0.0.1:80", "redis://127.0.0.1:99999", "etcd://"}) {
        auto o = run_example(url);
        BOOST_TEST_INFO(url << " output:\n" << o.text());
        BOOST_TEST(o.status == 2);
        BOOST_TEST(o.lines.empty());
    }
}

// Nobody listening: exit 1 without taking any lock.
BOOST_AUTO_TEST_CASE(unreachable_store_exits_1)
{
    auto o = run_example("redis://127.0.0.1:" + std::to_string(dlock::test::free_port()));
    BOOST_TEST_INFO("output:\n" << o.text());
    BOOST_TEST(o.status == 1);
    BOOST_TEST(token_after(o, "first holds") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
