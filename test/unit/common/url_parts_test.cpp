// SPDX-License-Identifier: BSL-1.0
// The URL kit (src/common/url_parts.hpp) through the three server-list stores that share
// parse_list_url (etcd, memcached, ZooKeeper): each message as the stores said it before
// they shared it, and each store's own meaning of the path.
#include <dlock/error.hpp>
#ifdef DLOCK_HAS_ETCD
#include <dlock/etcd/config.hpp>
#endif
#ifdef DLOCK_HAS_MEMCACHED
#include <dlock/memcached/config.hpp>
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
#include <dlock/zookeeper/config.hpp>
#endif

#include "common/url_parts.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

namespace {

// The message parse_url gives for `url` (empty if it parsed).
template <class Config, class Error, class Parse>
std::string message_of(Parse parse, const std::string& url)
{
    Config c;
    Error e;
    return parse(url, c, e) ? std::string() : e.message;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(url_parts_kit)

BOOST_AUTO_TEST_CASE(server_lists_are_written_back_with_v6_hosts_in_brackets)
{
    struct srv {
        std::string host;
        int port;
    };
    std::vector<srv> l{{"a", 1}, {"::1", 2}};
    BOOST_TEST(dlock::detail::host_list(l) == "a:1,[::1]:2");
    BOOST_TEST(dlock::detail::host_list(std::vector<srv>{}).empty());
}

BOOST_AUTO_TEST_CASE(sql_table_names)
{
    using dlock::detail::sql_table_name;
    BOOST_TEST(sql_table_name("dlock_locks", 63));
    BOOST_TEST(sql_table_name("app.locks", 63));
    BOOST_TEST(!sql_table_name("a.b.c", 63));
    BOOST_TEST(!sql_table_name("1abc", 63));
    BOOST_TEST(!sql_table_name("", 63));
    BOOST_TEST(!sql_table_name("x;drop", 63));
    BOOST_TEST(sql_table_name(std::string(58, 'a'), 58));
    BOOST_TEST(!sql_table_name(std::string(59, 'a'), 58));
}

#ifdef DLOCK_HAS_ETCD
BOOST_AUTO_TEST_CASE(etcd_messages)
{
    auto m = [](const std::string& u) {
        return message_of<dlock::etcd::config, dlock::etcd::config_error>(dlock::etcd::parse_url, u);
    };
    BOOST_TEST(m("h:1") == "not an etcd URL (expected etcd://host:port[,host:port...]): 'h:1'");
    BOOST_TEST(m("redis://h") == "unsupported scheme in 'redis://' (expected etcd://)");
    BOOST_TEST(m("etcd://u:p@h") == "etcd URL: user names and passwords are not supported yet");
    BOOST_TEST(m("etcd:///p") == "etcd URL: no member in 'etcd:///p'");
    BOOST_TEST(m("etcd://h,h").empty());  // etcd takes a member twice
    BOOST_TEST(m("etcd://h?timeout=0s") == "etcd URL: option 'timeout': bad duration '0s'");
    BOOST_TEST(m("etcd://h?connections=0") == "etcd URL: connections: '0' is not 1..64");
    BOOST_TEST(m("etcd://h?connections=2x") == "etcd URL: connections: '2x' is not 1..64");
    BOOST_TEST(m("etcd://h?connections=64").empty());
}
#endif

#ifdef DLOCK_HAS_MEMCACHED
BOOST_AUTO_TEST_CASE(memcached_messages)
{
    auto m = [](const std::string& u) {
        return message_of<dlock::memcached::config, dlock::memcached::config_error>(dlock::memcached::parse_url, u);
    };
    BOOST_TEST(m("localhost:11211") ==
               "not a memcached URL (expected memcached://host:port[,host:port...]): 'localhost:11211'");
    BOOST_TEST(m("memcached://a/x") == "memcached URL: no path expected in 'memcached://a/x'");
    BOOST_TEST(m("memcached://a/").empty());
    BOOST_TEST(m("memcached://a,a:11211") == "memcached URL: server a:11211 is listed twice");
    BOOST_TEST(m("memcached://") == "memcached URL: no server in 'memcached://'");
    BOOST_TEST(m("memcached://a?timeout=0s").empty());  // zero: no request timeout
}
#endif

#ifdef DLOCK_HAS_ZOOKEEPER
BOOST_AUTO_TEST_CASE(zookeeper_messages_and_chroot)
{
    auto m = [](const std::string& u) {
        return message_of<dlock::zookeeper::config, dlock::zookeeper::config_error>(dlock::zookeeper::parse_url, u);
    };
    BOOST_TEST(m("zk://a,a") == "zk URL: server a:2181 is listed twice");
    BOOST_TEST(m("zk:///app") == "zk URL: no server in 'zk:///app'");
    BOOST_TEST(m("zookeeper://a/app").empty());
    BOOST_TEST(m("zk://a/b/").substr(0, 15) == "zk URL: chroot ");
    dlock::zookeeper::config c;
    dlock::zookeeper::config_error e;
    BOOST_TEST_REQUIRE(dlock::zookeeper::parse_url("zk://a:1/", c, e));
    BOOST_TEST(c.chroot.empty());  // a lone '/' is no chroot
    BOOST_TEST(dlock::zookeeper::to_url(c) == "zk://a:1");
    // A URL that fails at its last part leaves the config as it was: servers, chroot and all.
    BOOST_TEST(!dlock::zookeeper::parse_url("zk://b:2/app?nope=1", c, e));
    BOOST_TEST(dlock::zookeeper::to_url(c) == "zk://a:1");
}
#endif

BOOST_AUTO_TEST_SUITE_END()
