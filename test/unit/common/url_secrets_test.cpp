// SPDX-License-Identifier: BSL-1.0
// No store's URL parser shows a password in its messages, however the password is written:
// raw '?' and '@' in it split the URL where the parser does not expect (issue 29, item 8).
#include <dlock/redis/config.hpp>
#ifdef DLOCK_HAS_POSTGRES
#include <dlock/postgres/config.hpp>
#endif
#ifdef DLOCK_HAS_MARIADB
#include <dlock/mariadb/config.hpp>
#endif
#ifdef DLOCK_HAS_ETCD
#include <dlock/etcd/config.hpp>
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
#include <dlock/zookeeper/config.hpp>
#endif
#ifdef DLOCK_HAS_MEMCACHED
#include <dlock/memcached/config.hpp>
#endif

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace {

// Passwords whose pieces sit around raw '?', '@', ':', '/' and '#'.
const std::vector<std::string> passwords = {"qX7?zW8",         "qX7?zW8@vY9",     "qX7@zW8?vY9",
                                            "qX7@zW8?vY9@kU6", "qX7?zW8:vY9@kU6", "qX7/zW8?vY9#kU6@"};
const char* const pieces[] = {"qX7", "zW8", "vY9", "kU6"};

// Each URL `before + password + after` is refused, and its message shows no piece.
template <class Config, class Error, class Parse>
void check(Parse parse, const std::vector<std::pair<std::string, std::string>>& forms)
{
    for (const auto& [before, after] : forms)
        for (const auto& pw : passwords) {
            const std::string url = before + pw + after;
            Config c;
            Error err;
            BOOST_TEST(!parse(url, c, err), url);
            for (const char* piece : pieces)
                BOOST_TEST(err.message.find(piece) == std::string::npos, url << " -> " << err.message);
        }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(url_secrets)

BOOST_AUTO_TEST_CASE(redis)
{
    check<dlock::redis::config, dlock::redis::config_error>(
        [](const std::string& u, auto& c, auto& e) { return dlock::redis::parse_url(u, c, e); },
        {{"redis://:", "@host:6379/0"},
         {"redis://user:", "@host:6379/0?timeout=1s"},
         {"redis://user:", "@host:0"},
         {"rediss://u:", "@h/x"},
         {"redis+sentinel://u:", "@a:1,b:2/m"},
         {"redis:/u:", "@h"}});
}

#ifdef DLOCK_HAS_POSTGRES
BOOST_AUTO_TEST_CASE(postgres)
{
    check<dlock::postgres::config, dlock::postgres::config_error>(
        [](const std::string& u, auto& c, auto& e) { return dlock::postgres::parse_url(u, c, e); },
        {{"postgresql://u:", "@host/db"},
         {"postgresql://u:", "@host:0/db?table=t"},
         {"postgresql://u:", "@/db"},
         {"postgresql:/u:", "@h/db"}});
}
#endif

#ifdef DLOCK_HAS_MARIADB
BOOST_AUTO_TEST_CASE(mariadb)
{
    check<dlock::mariadb::config, dlock::mariadb::config_error>(
        [](const std::string& u, auto& c, auto& e) { return dlock::mariadb::parse_url(u, c, e); },
        {{"mariadb://u:", "@host/db"},
         {"mariadb://u:", "@host:0/db?table=t"},
         {"mariadb://u:", "@/db"},
         {"mariadb:/u:", "@h/db"}});
}
#endif

#ifdef DLOCK_HAS_ETCD
BOOST_AUTO_TEST_CASE(etcd)
{
    check<dlock::etcd::config, dlock::etcd::config_error>(
        [](const std::string& u, auto& c, auto& e) { return dlock::etcd::parse_url(u, c, e); },
        {{"etcd://u:", "@host:2379"}, {"etcd://u:", "@a:1,b:2/prefix?dial_timeout=1s"}, {"etcd:/u:", "@h"}});
}
#endif

#ifdef DLOCK_HAS_ZOOKEEPER
BOOST_AUTO_TEST_CASE(zookeeper)
{
    check<dlock::zookeeper::config, dlock::zookeeper::config_error>(
        [](const std::string& u, auto& c, auto& e) { return dlock::zookeeper::parse_url(u, c, e); },
        {{"zk://u:", "@host:2181"}, {"zk://u:", "@a:1,b:2/chroot"}, {"zk:/u:", "@h"}});
}
#endif

#ifdef DLOCK_HAS_MEMCACHED
BOOST_AUTO_TEST_CASE(memcached)
{
    check<dlock::memcached::config, dlock::memcached::config_error>(
        [](const std::string& u, auto& c, auto& e) { return dlock::memcached::parse_url(u, c, e); },
        {{"memcached://u:", "@host:11211"}, {"memcached://u:", "@a:1,b:2"}, {"memcached:/u:", "@h"}});
}
#endif

BOOST_AUTO_TEST_SUITE_END()
