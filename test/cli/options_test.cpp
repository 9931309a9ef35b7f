// SPDX-License-Identifier: BSL-1.0
// The dlock tool's option parsing: precedence, durations, and one clear message per mistake.
#include "cli/options.hpp"

#include <boost/test/unit_test.hpp>

#include <map>

using namespace dlock::cli;
using namespace std::chrono_literals;

namespace {

struct fixture {
    std::map<std::string, std::string> env;
    std::map<std::string, std::string> files;

    bool parse(std::vector<std::string> args, options& o, parse_error& err)
    {
        return dlock::cli::parse(
            args, o, err,
            [this](const char* k) -> const char* {
                auto it = env.find(k);
                return it == env.end() ? nullptr : it->second.c_str();
            },
            [this](const std::string& path, std::string& text) {
                auto it = files.find(path);
                if (it == files.end())
                    return false;
                text = it->second;
                return true;
            });
    }
    options ok(std::vector<std::string> args)
    {
        options o;
        parse_error err;
        BOOST_TEST_REQUIRE(parse(args, o, err), err.message);
        return o;
    }
    std::string bad(std::vector<std::string> args)
    {
        options o;
        parse_error err;
        BOOST_TEST_REQUIRE(!parse(args, o, err));
        BOOST_TEST(err.message.find('\n') == std::string::npos);
        return err.message;
    }
};

bool has(const std::string& s, const std::string& part)
{
    return s.find(part) != std::string::npos;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cli_options, fixture)

BOOST_AUTO_TEST_CASE(run_defaults)
{
    auto o = ok({"run", "job", "--", "make", "-j2"});
    BOOST_TEST((o.cmd == command::run));
    BOOST_TEST(o.name == "job");
    BOOST_TEST((o.argv == std::vector<std::string>{"make", "-j2"}));
    BOOST_TEST(o.servers.at(0).host == "127.0.0.1");
    BOOST_TEST(o.servers.at(0).port == 6379);
    BOOST_TEST(o.prefix == "dlock");
    BOOST_TEST(o.lease.count() == 30'000);
    BOOST_TEST(!o.wait.has_value());
    BOOST_TEST(o.watchdog);
    BOOST_TEST(o.conflict_exit_code == 75);
}

BOOST_AUTO_TEST_CASE(flags_with_values_and_equals)
{
    auto o = ok({"run", "--lease", "500ms", "--wait=2s", "--no-watchdog", "--grace", "1m", "--prefix=app",
                 "--conflict-exit-code", "9", "job", "--", "true"});
    BOOST_TEST(o.lease.count() == 500);
    BOOST_TEST(o.wait->count() == 2000);
    BOOST_TEST(!o.watchdog);
    BOOST_TEST(o.grace.count() == 60'000);
    BOOST_TEST(o.prefix == "app");
    BOOST_TEST(o.conflict_exit_code == 9);
    BOOST_TEST(ok({"run", "--wait", "0", "job", "--", "true"}).wait->count() == 0);
}

BOOST_AUTO_TEST_CASE(no_scripting_flag_and_config_field)
{
    BOOST_TEST(ok({"run", "job", "--", "true"}).scripting);
    BOOST_TEST(!ok({"run", "--no-scripting", "job", "--", "true"}).scripting);
    BOOST_TEST(!ok({"status", "--no-scripting", "job"}).scripting);
    files["/c.json"] = R"({"scripting": false})";
    BOOST_TEST(!ok({"run", "--config", "/c.json", "job", "--", "true"}).scripting);
    files["/bad.json"] = R"({"scripting": "no"})";
    BOOST_TEST(
        has(bad({"run", "--config", "/bad.json", "job", "--", "true"}), "\"scripting\": expected true or false"));
    // Only one server (or Sentinel): Redlock and Cluster keep their scripts.
    BOOST_TEST(has(bad({"run", "--no-scripting", "--url", "redis://a:1,redis://b:2,redis://c:3", "job", "--", "true"}),
                   "--no-scripting is for one Redis server"));
    BOOST_TEST(has(bad({"run", "--no-scripting", "--cluster", "job", "--", "true"}), "--no-scripting"));
}

BOOST_AUTO_TEST_CASE(read_write_and_semaphore_flags)
{
    BOOST_TEST(ok({"run", "--shared", "job", "--", "true"}).shared);
    BOOST_TEST(ok({"run", "--exclusive", "job", "--", "true"}).exclusive);
    BOOST_TEST(ok({"run", "--permits", "4", "job", "--", "true"}).permits == 4u);
    BOOST_TEST(ok({"run", "job", "--", "true"}).permits == 0u);
    for (const char* n : {"0", "-1", "x", "4x", "", "2000000"})
        BOOST_TEST(has(bad({"run", "--permits", n, "job", "--", "true"}), "--permits: expected a number"));
    BOOST_TEST(has(bad({"run", "--shared", "--exclusive", "job", "--", "true"}), "exclude each other"));
    BOOST_TEST(has(bad({"run", "--shared", "--permits", "2", "job", "--", "true"}), "exclude each other"));
    BOOST_TEST(has(bad({"status", "--shared", "job"}), "--shared"));  // run and release only
    BOOST_TEST(ok({"release", "--force", "--shared", "job"}).shared);
    BOOST_TEST(ok({"release", "--force", "--exclusive", "job"}).exclusive);
    BOOST_TEST(has(bad({"release", "--force", "--shared", "--exclusive", "job"}), "exclude each other"));
}

#ifdef DLOCK_HAS_MARIADB
BOOST_AUTO_TEST_CASE(mariadb_urls)
{
    auto o = ok({"status", "--url", "mariadb://app:pw@db:3307/locks?table=leases", "job"});
    BOOST_TEST((o.topology == topology::mariadb));
    BOOST_TEST(o.mariadb.port == 3307);
    BOOST_TEST(o.mariadb.table == "leases");
    BOOST_TEST(o.mariadb.password == "pw");
    auto m = ok({"release", "--force", "--url", "mysql://app@db/locks", "job"});
    BOOST_TEST((m.topology == topology::mariadb));
    BOOST_TEST(m.mariadb.port == 3306);
    BOOST_TEST(has(bad({"release", "--url", "mariadb://app@db/locks", "job"}), "--force"));
    BOOST_TEST(has(bad({"run", "--url", "mariadb://app@db/locks", "--cluster", "job", "--", "true"}), "--cluster"));
    BOOST_TEST(has(bad({"status", "--url", "mariadb://app@db/locks?table=a;b", "job"}), "table"));
    BOOST_TEST(!has(bad({"status", "--url", "mariadb://app:hunter2@db:0/locks", "job"}), "hunter2"));
}
#endif

#ifdef DLOCK_HAS_MEMCACHED
BOOST_AUTO_TEST_CASE(memcached_urls)
{
    auto o = ok({"run", "--url", "memcached://a:1,b", "--lease", "10s", "job", "--", "true"});
    BOOST_TEST((o.topology == topology::memcached));
    BOOST_REQUIRE(o.memcached.servers.size() == 2u);
    BOOST_TEST(o.memcached.servers[1].port == 11211);
    BOOST_TEST(has(bad({"run", "--url", "memcached://a", "--lease", "1500ms", "job", "--", "true"}), "whole seconds"));
    BOOST_TEST(has(bad({"run", "--url", "memcached://a", "--lease", "1s", "job", "--", "true"}), "at least 2s"));
    BOOST_TEST(has(bad({"run", "--url", "memcached://a:0", "job", "--", "true"}), "bad port"));
    BOOST_TEST(has(bad({"run", "--url", "memcached://a", "--cluster", "job", "--", "true"}), "--cluster"));
    BOOST_TEST(has(bad({"release", "--url", "memcached://a", "job"}), "--force"));
}
#endif

#ifdef DLOCK_HAS_ZOOKEEPER
BOOST_AUTO_TEST_CASE(zookeeper_urls)
{
    auto o = ok({"run", "--url", "zk://a:1,b/app?root=/locks", "job", "--", "true"});
    BOOST_TEST((o.topology == topology::zookeeper));
    BOOST_REQUIRE(o.zookeeper.servers.size() == 2u);
    BOOST_TEST(o.zookeeper.servers[1].port == 2181);
    BOOST_TEST(o.zookeeper.chroot == "/app");
    BOOST_TEST(o.zookeeper.root == "/locks");
    BOOST_TEST(has(bad({"run", "--url", "zk://a:0", "job", "--", "true"}), "bad port"));
    BOOST_TEST(has(bad({"run", "--url", "zk://a", "--cluster", "job", "--", "true"}), "--cluster"));
    BOOST_TEST(has(bad({"release", "--url", "zk://a", "job"}), "--force"));
}
#endif

BOOST_AUTO_TEST_CASE(arguments_after_the_separator_belong_to_the_command)
{
    auto o = ok({"run", "job", "--", "grep", "--help", "--url", "x"});
    BOOST_TEST((o.argv == std::vector<std::string>{"grep", "--help", "--url", "x"}));
    BOOST_TEST((o.cmd == command::run));
}

BOOST_AUTO_TEST_CASE(precedence_flag_file_env_default)
{
    env["DLOCK_URL"] = "redis://10.0.0.1:7000";
    BOOST_TEST(ok({"status", "job"}).servers.at(0).port == 7000);
    files["/c.json"] = R"({"url": "redis://127.0.0.2:7001", "prefix": "fromfile", "lease": "3s", "wait": 250,
                          "watchdog": false, "grace": "2s", "conflict_exit_code": 3})";
    auto o = ok({"run", "--config", "/c.json", "job", "--", "true"});
    BOOST_TEST(o.servers.at(0).host == "127.0.0.2");
    BOOST_TEST(o.servers.at(0).port == 7001);
    BOOST_TEST(o.prefix == "fromfile");
    BOOST_TEST(o.lease.count() == 3000);
    BOOST_TEST(o.wait->count() == 250);
    BOOST_TEST(!o.watchdog);
    BOOST_TEST(o.grace.count() == 2000);
    BOOST_TEST(o.conflict_exit_code == 3);
    auto f = ok({"run", "--config", "/c.json", "--url", "redis://127.0.0.3:7002", "--prefix", "flag", "--lease", "4s",
                 "job", "--", "true"});
    BOOST_TEST(f.servers.at(0).port == 7002);
    BOOST_TEST(f.prefix == "flag");
    BOOST_TEST(f.lease.count() == 4000);
    env["DLOCK_CONFIG"] = "/c.json";
    BOOST_TEST(ok({"status", "job"}).prefix == "fromfile");
}

BOOST_AUTO_TEST_CASE(config_file_redis_object)
{
    files["/r.json"] = R"({"redis": {"host": "127.0.0.9", "port": 7009, "password": "pw", "request_timeout": "2s"}})";
    auto o = ok({"status", "--config", "/r.json", "job"});
    BOOST_TEST(o.servers.at(0).host == "127.0.0.9");
    BOOST_TEST(o.servers.at(0).port == 7009);
    BOOST_TEST(o.servers.at(0).password == "pw");
    BOOST_TEST(o.servers.at(0).request_timeout.count() == 2000);
}

BOOST_AUTO_TEST_CASE(url_lists_choose_the_topology)
{
    auto one = ok({"status", "job"});
    BOOST_TEST((one.topology == topology::single));
    auto sentinel = ok({"status", "--url", "redis+sentinel://127.0.0.1:1,127.0.0.1:2/mm", "job"});
    BOOST_TEST((sentinel.topology == topology::single));  // its commas list sentinels
    BOOST_TEST_REQUIRE(sentinel.servers.size() == 1u);
    BOOST_TEST(sentinel.servers[0].sentinel.nodes.size() == 2u);
    auto rl = ok({"status", "--url", "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3", "job"});
    BOOST_TEST((rl.topology == topology::redlock));
    BOOST_TEST_REQUIRE(rl.servers.size() == 3u);
    BOOST_TEST(rl.servers[2].port == 3);
    auto cl = ok({"status", "--cluster", "--url", "redis://127.0.0.1:1", "job"});
    BOOST_TEST((cl.topology == topology::cluster));
    files["/rl.json"] =
        R"({"url": ["redis://127.0.0.1:4", "redis://127.0.0.1:5", "redis://127.0.0.1:6"], "redis": {"password": "pw"}})";
    auto f = ok({"status", "--config", "/rl.json", "job"});
    BOOST_TEST((f.topology == topology::redlock));
    BOOST_TEST_REQUIRE(f.servers.size() == 3u);
    BOOST_TEST(f.servers[1].port == 5);
    BOOST_TEST(f.servers[2].password == "pw");  // "redis" applies to every node
    files["/cl.json"] = R"({"url": "redis://127.0.0.1:7", "cluster": true})";
    BOOST_TEST((ok({"status", "--config", "/cl.json", "job"}).topology == topology::cluster));
    BOOST_TEST(has(bad({"status", "--url", "redis://127.0.0.1:1,nope://x", "job"}), "--url: URL scheme 'nope'"));
}

BOOST_AUTO_TEST_CASE(mistakes_have_one_clear_line)
{
    BOOST_TEST(has(bad({}), "missing command"));
    BOOST_TEST(has(bad({"lock", "x"}), "unknown command 'lock'"));
    BOOST_TEST(has(bad({"run", "--bogus", "job", "--", "true"}), "unknown option '--bogus'"));
    BOOST_TEST(has(bad({"status", "--lease", "1s", "job"}), "'--lease' does not apply"));
    BOOST_TEST(has(bad({"run", "--lease", "5x", "job", "--", "true"}), "--lease '5x'"));
    BOOST_TEST(has(bad({"run", "--lease", "0", "job", "--", "true"}), "longer than 0"));
    BOOST_TEST(has(bad({"run", "--wait", "-1s", "job", "--", "true"}), "--wait '-1s'"));
    BOOST_TEST(has(bad({"run", "--grace", "", "job", "--", "true"}), "--grace ''"));
    BOOST_TEST(has(bad({"run", "--conflict-exit-code", "300", "job", "--", "true"}), "0 to 255"));
    BOOST_TEST(has(bad({"run", "--lease"}), "needs a value"));
    BOOST_TEST(has(bad({"run", "--no-watchdog=1", "job", "--", "true"}), "takes no value"));
    BOOST_TEST(has(bad({"run", "--", "true"}), "missing lock NAME"));
    BOOST_TEST(has(bad({"run", "job"}), "missing COMMAND"));
    BOOST_TEST(has(bad({"run", "job", "true"}), "unexpected 'true' before '--'"));
    BOOST_TEST(has(bad({"run", "", "--", "true"}), "empty"));
    BOOST_TEST(has(bad({"status", "a", "b"}), "unexpected argument 'b'"));
    BOOST_TEST(has(bad({"release", "job"}), "without --force"));
    BOOST_TEST(has(bad({"status", "--url", "http://x", "job"}), "--url: URL scheme 'http'"));
    BOOST_TEST(!has(bad({"status", "--url", "redis://:s3cret@h:0", "job"}), "s3cret"));
    env["DLOCK_URL"] = "redis://h:0";
    BOOST_TEST(has(bad({"status", "job"}), "$DLOCK_URL: port '0'"));
    env.clear();
    BOOST_TEST(has(bad({"status", "--config", "/missing.json", "job"}), "cannot be read"));
    files["/bad.json"] = "{nope";
    BOOST_TEST(has(bad({"status", "--config", "/bad.json", "job"}), "not valid JSON"));
    files["/unknown.json"] = R"({"leese": "1s"})";
    BOOST_TEST(has(bad({"status", "--config", "/unknown.json", "job"}), "unknown field \"leese\""));
    files["/type.json"] = R"({"lease": true})";
    BOOST_TEST(has(bad({"status", "--config", "/type.json", "job"}), "\"lease\""));
    files["/redis.json"] = R"({"redis": {"port": "many"}})";
    BOOST_TEST(has(bad({"status", "--config", "/redis.json", "job"}), "\"redis\""));
}

BOOST_AUTO_TEST_CASE(huge_waits_mean_forever)
{
    // A deadline that far away cannot be formed; it must never mean "held elsewhere".
    BOOST_TEST(!ok({"run", "--wait", "3000000h", "job", "--", "true"}).wait.has_value());
    BOOST_TEST(!ok({"run", "--wait", "9223372036854775807", "job", "--", "true"}).wait.has_value());
    BOOST_TEST(!ok({"run", "--wait", "99999999999999999999h", "job", "--", "true"}).wait.has_value());
    BOOST_TEST(!ok({"run", "--wait=2562047788016h", "job", "--", "true"}).wait.has_value());
    files["/w.json"] = R"({"wait": "3000000h"})";
    BOOST_TEST(!ok({"run", "--config", "/w.json", "job", "--", "true"}).wait.has_value());
    files["/w2.json"] = R"({"wait": 9223372036854775807})";
    BOOST_TEST(!ok({"run", "--config", "/w2.json", "job", "--", "true"}).wait.has_value());
    // Long but representable waits are kept, and 0 is still one try.
    BOOST_TEST(ok({"run", "--wait", "1000h", "job", "--", "true"}).wait->count() == 3'600'000'000);
    BOOST_TEST(ok({"run", "--wait", "0", "job", "--", "true"}).wait->count() == 0);
    BOOST_TEST(ok({"run", "--wait", "0s", "job", "--", "true"}).wait->count() == 0);
    BOOST_TEST(has(bad({"run", "--wait", "5x", "job", "--", "true"}), "--wait '5x'"));
}

BOOST_AUTO_TEST_CASE(leases_beyond_the_maximum_are_refused)
{
    for (std::string lease : {"9223372036854775807", "70368744177665", "99999999999999999999h", "30000000h"}) {
        auto m = bad({"run", "--lease", lease, "job", "--", "true"});
        BOOST_TEST(has(m, "--lease '" + lease + "'"), m);
        BOOST_TEST(has(m, "maximum"), m);
        BOOST_TEST(has(m, std::to_string(max_duration.count()) + "ms"), m);
    }
    BOOST_TEST(ok({"run", "--lease", "70368744177664", "job", "--", "true"}).lease == max_duration);
    BOOST_TEST(
        has(bad({"run", "--grace", "30000000h", "job", "--", "true"}), "--grace '30000000h': longer than the maximum"));
    files["/l.json"] = R"({"lease": 9223372036854775807})";
    auto m = bad({"run", "--config", "/l.json", "job", "--", "true"});
    BOOST_TEST(has(m, "\"lease\""), m);
    BOOST_TEST(has(m, "maximum"), m);
    files["/l2.json"] = R"({"lease": "30000000h"})";
    BOOST_TEST(has(bad({"run", "--config", "/l2.json", "job", "--", "true"}), "maximum"));
}

BOOST_AUTO_TEST_CASE(the_same_server_twice_is_refused)
{
    auto m = bad({"status", "--url", "redis://127.0.0.1:6379,redis://127.0.0.1:6379/0", "job"});
    BOOST_TEST(has(m, "--url: "), m);
    BOOST_TEST(has(m, "same server"), m);
    BOOST_TEST(has(m, "127.0.0.1:6379"), m);
    BOOST_TEST(
        has(bad({"status", "--url", "redis://localhost,redis://h:1,redis://localhost:6379", "job"}), "element 3 of 3"));
    m = bad({"status", "--url", "redis://u:s3cret@h:1,redis://:s3cret@h:1", "job"});
    BOOST_TEST(has(m, "same server"), m);
    BOOST_TEST(!has(m, "s3cret"), m);
    BOOST_TEST(has(bad({"status", "--cluster", "--url", "redis://h:1,redis://h:1", "job"}), "same server"));
    env["DLOCK_URL"] = "redis://h:1,redis://h:1";
    BOOST_TEST(has(bad({"status", "job"}), "$DLOCK_URL: node list"));
    env.clear();
    // The config file's "redis" object applies to every node: here it makes them one server.
    files["/same.json"] = R"({"url": ["redis://a:1", "redis://b:1"], "redis": {"host": "c"}})";
    BOOST_TEST(has(bad({"status", "--config", "/same.json", "job"}), "same server"));
}

BOOST_AUTO_TEST_CASE(raw_passwords_in_urls)
{
    auto o = ok({"status", "--url", "redis://user:p@ss#word@host:6379", "job"});
    BOOST_TEST_REQUIRE(o.servers.size() == 1u);
    BOOST_TEST(o.servers[0].host == "host");
    BOOST_TEST(o.servers[0].password == "p@ss#word");
    BOOST_TEST(!has(bad({"status", "--url", "redis://user:p@ss#word@host:0", "job"}), "ss#wo"));
}

// `dlock elect`: a candidate runs a COMMAND, an observer runs none; each refuses the other's flags.
BOOST_AUTO_TEST_CASE(elect_candidates_and_observers)
{
    auto c = ok({"elect", "--value", "node-1", "--lease", "5s", "sched", "--", "job"});
    BOOST_TEST((c.cmd == command::elect));
    BOOST_TEST(c.name == "sched");
    BOOST_TEST(c.value.value_or("") == "node-1");
    BOOST_TEST(!c.observe);
    BOOST_TEST((c.argv == std::vector<std::string>{"job"}));
    BOOST_TEST(c.lease.count() == 5'000);
    BOOST_TEST(!ok({"elect", "sched", "--", "job"}).value.has_value());  // the tool's default: host:pid
    BOOST_TEST(ok({"elect", "--value=", "sched", "--", "job"}).value.value_or("x").empty());
    auto w = ok({"elect", "--observe", "--json", "sched"});
    BOOST_TEST(w.observe);
    BOOST_TEST(w.json);
    BOOST_TEST(w.argv.empty());
    BOOST_TEST(has(bad({"elect", "sched"}), "elect: missing COMMAND"));
    BOOST_TEST(has(bad({"elect", "--observe", "sched", "--", "job"}), "runs no COMMAND"));
    BOOST_TEST(has(bad({"elect", "--observe", "--value", "v", "sched"}), "--value is a candidate's"));
    BOOST_TEST(!c.rejoin);
    BOOST_TEST(ok({"elect", "--rejoin", "sched", "--", "job"}).rejoin);
    BOOST_TEST(has(bad({"elect", "--observe", "--rejoin", "sched"}), "--rejoin is a candidate's"));
    BOOST_TEST(has(bad({"run", "--rejoin", "job", "--", "true"}), "'--rejoin' does not apply"));
    BOOST_TEST(has(bad({"elect", "--json", "sched", "--", "job"}), "--json is for --observe"));
    BOOST_TEST(has(bad({"elect", "--wait", "1s", "sched", "--", "job"}), "'--wait' does not apply"));
    BOOST_TEST(has(bad({"elect", "--shared", "sched", "--", "job"}), "'--shared' does not apply"));
    BOOST_TEST(has(bad({"run", "--value", "v", "job", "--", "true"}), "'--value' does not apply"));
    BOOST_TEST(has(bad({"elect", "sched", "job"}), "elect: unexpected 'job' before '--'"));
}

BOOST_AUTO_TEST_CASE(help)
{
    BOOST_TEST((ok({"--help"}).cmd == command::help));
    auto o = ok({"run", "--help"});
    BOOST_TEST((o.cmd == command::help));
    BOOST_TEST(o.help_topic == "run");
    BOOST_TEST(has(usage("run"), "--conflict-exit-code"));
    BOOST_TEST(has(usage("status"), "--json"));
    BOOST_TEST(has(usage("release"), "--force"));
    BOOST_TEST(has(usage(""), "run NAME -- COMMAND"));
    BOOST_TEST(has(usage(""), "elect NAME -- COMMAND"));
    BOOST_TEST(has(usage("elect"), "--observe"));
    BOOST_TEST(has(usage("elect"), "DLOCK_LEADER_VALUE"));
}

// The tool's version is the project's (DLOCK_PROJECT_VERSION comes from CMake's project()).
BOOST_AUTO_TEST_CASE(version)
{
    BOOST_TEST((ok({"--version"}).cmd == command::version));
    BOOST_TEST((ok({"version"}).cmd == command::version));
    BOOST_TEST(has(bad({"--version", "extra"}), "--version"));
    BOOST_TEST(version_text().rfind(std::string("dlock ") + DLOCK_PROJECT_VERSION + "\n", 0) == 0, version_text());
    BOOST_TEST(has(version_text(), "stores: redis"));
    BOOST_TEST(has(usage(""), "--version"));
}

BOOST_AUTO_TEST_SUITE_END()
