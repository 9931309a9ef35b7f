// SPDX-License-Identifier: BSL-1.0
// Connection settings from URLs and JSON: every field, every kind of bad input.
#include <dlock/error.hpp>
#include <dlock/redis/config.hpp>

#include "unit/print.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

using namespace std::chrono_literals;
using dlock::error;
using dlock::redis::config;
using dlock::redis::config_error;
using dlock::redis::parse_duration;
using dlock::redis::parse_json;
using dlock::redis::parse_url;
using dlock::redis::transport;

namespace {

config url_ok(std::string_view url)
{
    config c;
    config_error err;
    bool ok = parse_url(url, c, err);
    BOOST_TEST_REQUIRE(ok, "parse_url(" << url << "): " << err.message);
    BOOST_TEST(!err.code);
    return c;
}

// Expects a failure with `code` whose message mentions `field`; `out` must stay untouched.
void url_bad(std::string_view url, error code, std::string_view field)
{
    BOOST_TEST_CONTEXT("url " << url)
    {
        config c;
        c.host = "untouched";
        config_error err;
        BOOST_TEST(!parse_url(url, c, err));
        BOOST_TEST(err.code == code, err.code.message() << " / " << err.message);
        BOOST_TEST(err.message.find(field) != std::string::npos, "message '" << err.message << "' names " << field);
        BOOST_TEST(c.host == "untouched");
    }
}

config json_ok(std::string_view text)
{
    config c;
    config_error err;
    bool ok = parse_json(boost::json::parse(text), c, err);
    BOOST_TEST_REQUIRE(ok, "parse_json(" << text << "): " << err.message);
    return c;
}

void json_bad(std::string_view text, error code, std::string_view field)
{
    BOOST_TEST_CONTEXT("json " << text)
    {
        config c;
        c.host = "untouched";
        config_error err;
        BOOST_TEST(!parse_json(boost::json::parse(text), c, err));
        BOOST_TEST(err.code == code, err.code.message() << " / " << err.message);
        BOOST_TEST(err.message.find(field) != std::string::npos, "message '" << err.message << "' names " << field);
        BOOST_TEST(c.host == "untouched");
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config_suite)

BOOST_AUTO_TEST_CASE(defaults)
{
    config c;
    BOOST_TEST((c.kind == transport::tcp));
    BOOST_TEST(c.host == "127.0.0.1");
    BOOST_TEST(c.port == 6379);
    BOOST_TEST(c.database == 0);
    BOOST_TEST(c.connect_timeout.count() == 5000);
    BOOST_TEST(c.request_timeout.count() == 5000);
    BOOST_TEST(c.tls_verify);
}

BOOST_AUTO_TEST_CASE(url_plain)
{
    auto c = url_ok("redis://example.com");
    BOOST_TEST((c.kind == transport::tcp));
    BOOST_TEST(c.host == "example.com");
    BOOST_TEST(c.port == 6379);
    BOOST_TEST(c.database == 0);
    BOOST_TEST(c.username.empty());
    BOOST_TEST(c.password.empty());

    c = url_ok("redis://10.1.2.3:7000/");
    BOOST_TEST(c.host == "10.1.2.3");
    BOOST_TEST(c.port == 7000);
    BOOST_TEST(c.database == 0);

    c = url_ok("redis://localhost:1/15");
    BOOST_TEST(c.port == 1);
    BOOST_TEST(c.database == 15);

    c = url_ok("redis://h:65535");
    BOOST_TEST(c.port == 65535);
}

BOOST_AUTO_TEST_CASE(url_tls)
{
    auto c = url_ok("rediss://cache.internal:6380/2?tls_ca_file=/etc/ca.pem&tls_verify=false"
                    "&tls_cert_file=/c.pem&tls_key_file=/k.pem");
    BOOST_TEST((c.kind == transport::tls));
    BOOST_TEST(c.host == "cache.internal");
    BOOST_TEST(c.port == 6380);
    BOOST_TEST(c.database == 2);
    BOOST_TEST(c.tls_ca_file == "/etc/ca.pem");
    BOOST_TEST(c.tls_cert_file == "/c.pem");
    BOOST_TEST(c.tls_key_file == "/k.pem");
    BOOST_TEST(!c.tls_verify);
    BOOST_TEST(url_ok("rediss://h?tls_verify=true").tls_verify);
    BOOST_TEST(url_ok("rediss://h?tls_verify=1").tls_verify);
    BOOST_TEST(!url_ok("rediss://h?tls_verify=no").tls_verify);
}

BOOST_AUTO_TEST_CASE(url_unix)
{
    auto c = url_ok("unix:///var/run/redis/redis.sock");
    BOOST_TEST((c.kind == transport::unix_socket));
    BOOST_TEST(c.path == "/var/run/redis/redis.sock");
    BOOST_TEST(c.database == 0);

    c = url_ok("unix:///tmp/r.sock?db=3&client_name=worker&request_timeout=250ms");
    BOOST_TEST((c.kind == transport::unix_socket));
    BOOST_TEST(c.path == "/tmp/r.sock");
    BOOST_TEST(c.database == 3);
    BOOST_TEST(c.client_name == "worker");
    BOOST_TEST(c.request_timeout.count() == 250);
}

BOOST_AUTO_TEST_CASE(url_credentials)
{
    auto c = url_ok("redis://alice:s3cret@h:6379");
    BOOST_TEST(c.username == "alice");
    BOOST_TEST(c.password == "s3cret");

    // Password only, as redis-cli reads it.
    c = url_ok("redis://:only-pass@h");
    BOOST_TEST(c.username.empty());
    BOOST_TEST(c.password == "only-pass");

    // Percent-encoded characters are decoded.
    c = url_ok("redis://bob:p%40ss%3Aw%2Ford@h");
    BOOST_TEST(c.username == "bob");
    BOOST_TEST(c.password == "p@ss:w/ord");

    c = url_ok("unix://u:pw@/tmp/r.sock");
    BOOST_TEST(c.username == "u");
    BOOST_TEST(c.password == "pw");
    BOOST_TEST(c.path == "/tmp/r.sock");
}

BOOST_AUTO_TEST_CASE(url_raw_passwords)
{
    // Users paste passwords unencoded: the user info ends at the last '@' before the query.
    for (auto [url, pw] : {std::pair{"redis://user:p@ss#word@host:6379", "p@ss#word"},
                           std::pair{"redis://user:p@ss:w/ord@host:6379", "p@ss:w/ord"},
                           std::pair{"redis://user:a/b#c@d:e@host:6379", "a/b#c@d:e"},
                           std::pair{"redis://user:p%40ss%23word@host:6379", "p@ss#word"},
                           std::pair{"redis://user:100%@host:6379", "100%"}, std::pair{"redis://user:#@host:6379", "#"},
                           std::pair{"redis://user:/@host:6379", "/"}}) {
        BOOST_TEST_CONTEXT(url)
        {
            auto c = url_ok(url);
            BOOST_TEST(c.host == "host");
            BOOST_TEST(c.port == 6379);
            BOOST_TEST(c.username == "user");
            BOOST_TEST(c.password == pw);
            BOOST_TEST(c.database == 0);
        }
    }
    auto c = url_ok("rediss://user:p@ss#word@host:6380/2?client_name=me@there");
    BOOST_TEST(c.host == "host");
    BOOST_TEST(c.port == 6380);
    BOOST_TEST(c.database == 2);
    BOOST_TEST(c.password == "p@ss#word");
    BOOST_TEST(c.client_name == "me@there");  // an '@' in the query is not the user info's
    c = url_ok("redis://:p@ss/w#rd@[::1]:7000");
    BOOST_TEST(c.host == "::1");
    BOOST_TEST(c.username.empty());
    BOOST_TEST(c.password == "p@ss/w#rd");
    c = url_ok("unix://u:p@ss@/tmp/r.sock");
    BOOST_TEST(c.password == "p@ss");
    BOOST_TEST(c.path == "/tmp/r.sock");
    c = url_ok("unix:///tmp/a@b.sock");  // no authority: the '@' is the path's
    BOOST_TEST(c.path == "/tmp/a@b.sock");
    BOOST_TEST(c.username.empty());
    c = url_ok("redis+sentinel://user:p@ss#w/rd@10.0.0.1,10.0.0.2:26380/mymaster/1");
    BOOST_TEST(c.password == "p@ss#w/rd");
    BOOST_TEST(c.username == "user");
    BOOST_TEST(c.sentinel.master_name == "mymaster");
    BOOST_TEST_REQUIRE(c.sentinel.nodes.size() == 2u);
    BOOST_TEST(c.sentinel.nodes[0].host == "10.0.0.1");
    BOOST_TEST(c.sentinel.nodes[1].port == 26380);
    BOOST_TEST(c.database == 1);
}

BOOST_AUTO_TEST_CASE(url_ipv6)
{
    auto c = url_ok("redis://[::1]:6390/4");
    BOOST_TEST(c.host == "::1");  // without brackets: ready for the resolver
    BOOST_TEST(c.port == 6390);
    BOOST_TEST(c.database == 4);

    c = url_ok("rediss://[2001:db8::7]");
    BOOST_TEST(c.host == "2001:db8::7");
    BOOST_TEST(c.port == 6379);
}

BOOST_AUTO_TEST_CASE(url_query_options)
{
    auto c = url_ok("redis://h/1?connect_timeout=2s&request_timeout=1500&client_name=svc"
                    "&reconnect_min=5ms&reconnect_max=1m");
    BOOST_TEST(c.connect_timeout.count() == 2000);
    BOOST_TEST(c.request_timeout.count() == 1500);
    BOOST_TEST(c.client_name == "svc");
    BOOST_TEST(c.reconnect_min.count() == 5);
    BOOST_TEST(c.reconnect_max.count() == 60000);
    BOOST_TEST(c.database == 1);

    // db in the query overrides the path; zero durations mean "no limit".
    c = url_ok("redis://h/1?db=9&request_timeout=0");
    BOOST_TEST(c.database == 9);
    BOOST_TEST(c.request_timeout.count() == 0);

    // Empty client name: send no CLIENT SETNAME.
    c = url_ok("redis://h?client_name=");
    BOOST_TEST(c.client_name.empty());
}

BOOST_AUTO_TEST_CASE(url_keeps_unrelated_fields)
{
    // parse_url starts from `out`, so settings the URL does not mention survive.
    config c;
    c.request_timeout = 42ms;
    config_error err;
    BOOST_TEST_REQUIRE(parse_url("redis://h:7000", c, err));
    BOOST_TEST(c.request_timeout.count() == 42);
    BOOST_TEST(c.port == 7000);
}

BOOST_AUTO_TEST_CASE(url_bad_scheme)
{
    url_bad("http://h:6379", error::unsupported_scheme, "http");
    url_bad("redis+tls://h", error::unsupported_scheme, "redis+tls");
    url_bad("tcp://h", error::unsupported_scheme, "tcp");
}

BOOST_AUTO_TEST_CASE(url_unparsable)
{
    url_bad("", error::invalid_url, "URL");
    url_bad("not a url", error::invalid_url, "not a url");
    url_bad("redis://h:6379/0 extra", error::invalid_url, "URL");
    url_bad("redis://[::1/0", error::invalid_url, "URL");
    url_bad("redis:///0", error::invalid_url, "host");
    url_bad("redis:", error::invalid_url, "host");
    url_bad("unix://", error::invalid_url, "path");
    url_bad("redis://[::1]abc", error::invalid_url, "after the host");
}

BOOST_AUTO_TEST_CASE(url_bad_port)
{
    url_bad("redis://h:0", error::invalid_port, "port '0'");
    url_bad("redis://h:70000", error::invalid_port, "port '70000'");
    url_bad("redis://h:65536", error::invalid_port, "port '65536'");
    url_bad("redis://h:99999999999999999999", error::invalid_port, "port");
    // Boost.URL 1.81 alone would read these as port "" or "12" followed by a path.
    url_bad("redis://h:abc", error::invalid_port, "port 'abc'");
    url_bad("redis://h:12ab", error::invalid_port, "port '12ab'");
    url_bad("redis://h:12ab/3", error::invalid_port, "port '12ab'");
    url_bad("redis://h:-1", error::invalid_port, "port '-1'");
    url_bad("redis://h:", error::invalid_port, "port ''");
}

BOOST_AUTO_TEST_CASE(url_bad_db)
{
    url_bad("redis://h/abc", error::invalid_database, "database 'abc'");
    url_bad("redis://h/-1", error::invalid_database, "database '-1'");
    url_bad("redis://h/1/2", error::invalid_database, "database '1/2'");
    url_bad("redis://h/99999999999", error::invalid_database, "database");
    url_bad("redis://h?db=x", error::invalid_database, "database 'x'");
    url_bad("unix:///s?db=-3", error::invalid_database, "database '-3'");
}

BOOST_AUTO_TEST_CASE(url_unknown_option)
{
    url_bad("redis://h?timeout=5s", error::invalid_option, "timeout");
    url_bad("redis://h?tls_verify=maybe", error::invalid_option, "tls_verify");
    url_bad("redis://h?client_name=a&bogus", error::invalid_option, "bogus");
}

BOOST_AUTO_TEST_CASE(url_bad_duration)
{
    url_bad("redis://h?connect_timeout=5x", error::invalid_duration, "connect_timeout");
    url_bad("redis://h?request_timeout=", error::invalid_duration, "request_timeout");
    url_bad("redis://h?request_timeout=-5s", error::invalid_duration, "request_timeout");
    url_bad("redis://h?reconnect_max=1.5s", error::invalid_duration, "reconnect_max");
    url_bad("redis://h?reconnect_min=ms", error::invalid_duration, "reconnect_min");
}

BOOST_AUTO_TEST_CASE(url_sentinel)
{
    auto c = url_ok("redis+sentinel://user:pw@10.0.0.1:26380,10.0.0.2,[::1]:5000/mymaster/"
                    "3?sentinel_password=sp&request_timeout=2s");
    BOOST_TEST(c.sentinel.master_name == "mymaster");
    BOOST_TEST_REQUIRE(c.sentinel.nodes.size() == 3u);
    BOOST_TEST(c.sentinel.nodes[0].host == "10.0.0.1");
    BOOST_TEST(c.sentinel.nodes[0].port == 26380);
    BOOST_TEST(c.sentinel.nodes[1].host == "10.0.0.2");
    BOOST_TEST(c.sentinel.nodes[1].port == 26379);  // Sentinel's default port
    BOOST_TEST(c.sentinel.nodes[2].host == "::1");
    BOOST_TEST(c.sentinel.nodes[2].port == 5000);
    BOOST_TEST(c.username == "user");  // the master's credentials
    BOOST_TEST(c.password == "pw");
    BOOST_TEST(c.sentinel.password == "sp");
    BOOST_TEST(c.database == 3);
    BOOST_TEST(c.request_timeout.count() == 2000);
    BOOST_TEST(url_ok("redis+sentinel://h/m").sentinel.master_name == "m");
    BOOST_TEST(url_ok("redis+sentinel://h/m").database == 0);
    url_bad("redis+sentinel://h:26379", error::invalid_url, "master name");
    url_bad("redis+sentinel://h:26379/", error::invalid_url, "master name");
    url_bad("redis+sentinel:///m", error::invalid_url, "sentinel");
    url_bad("redis+sentinel://h:0/m", error::invalid_port, "port '0'");
    url_bad("redis+sentinel://a:1,,b:2/m", error::invalid_url, "empty sentinel host");
    url_bad("redis+sentinel://[::1/m", error::invalid_url, "unclosed");
    url_bad("redis+sentinel://h/m/x", error::invalid_database, "database 'x'");
}

BOOST_AUTO_TEST_CASE(messages_never_show_passwords)
{
    using dlock::redis::redact_url;
    BOOST_TEST(redact_url("redis://user:s3cret@h:1/2") == "redis://user:***@h:1/2");
    BOOST_TEST(redact_url("redis://:s3cret@h") == "redis://:***@h");
    BOOST_TEST(redact_url("redis://user@h") == "redis://user@h");
    BOOST_TEST(redact_url("redis+sentinel://u:p@a:1,b:2/m?sentinel_password=x&db=1") ==
               "redis+sentinel://u:***@a:1,b:2/m?sentinel_password=***&db=1");
    BOOST_TEST(redact_url("unix:///s.sock?password=pw") == "unix:///s.sock?password=***");
    for (auto url : {"redis://u:s3cret@h:0", "redis://:s3cret@h/x", "redis+sentinel://:s3cret@h:0/m",
                     "redis://:s3cret@h?bogus=1", "redis+sentinel://:s3cret@h/m?sentinel_password=s3cret&x=1"}) {
        config c;
        config_error err;
        BOOST_TEST(!parse_url(url, c, err));
        BOOST_TEST(err.message.find("s3cret") == std::string::npos, err.message);
    }
}

BOOST_AUTO_TEST_CASE(messages_never_show_raw_passwords)
{
    using dlock::redis::redact_url;
    BOOST_TEST(redact_url("redis://user:p@ss#word@host:6379") == "redis://user:***@host:6379");
    BOOST_TEST(redact_url("redis://user:p@ss:w/ord@host:6379/1") == "redis://user:***@host:6379/1");
    BOOST_TEST(redact_url("redis://user:p%40ss@host") == "redis://user:***@host");
    BOOST_TEST(redact_url("redis://h?client_name=a@b") == "redis://h?client_name=a@b");
    BOOST_TEST(redact_url("unix:///tmp/a@b.sock") == "unix:///tmp/a@b.sock");
    BOOST_TEST(redact_url("redis://h?password=p#ss&db=1") == "redis://h?password=***&db=1");
    BOOST_TEST(redact_url("redis+sentinel://u:p@s/s#@a:1,b:2/m") == "redis+sentinel://u:***@a:1,b:2/m");
    // Every error path, with the password's pieces around '@', '#', ':', '/' and '?'.
    for (auto url : {"redis://u:qX7@zW8#vY9@h:0",
                     "redis://u:qX7@zW8#vY9@h:99999999999999999999",
                     "redis://u:qX7@zW8/vY9@h/x",
                     "redis://u:qX7@zW8:vY9@h:12ab/3",
                     "redis://u:qX7@zW8#vY9@h?bogus=1",
                     "redis://u:qX7@zW8#vY9@",
                     "redis://u:qX7@zW8#vY9@h:6379/0 extra",
                     "redis://u:qX7@zW8#vY9@[::1/0",
                     "redis://u:qX7@zW8#vY9@h?db=x",
                     "redis://u:qX7@zW8#vY9@h?connect_timeout=5x",
                     "rediss://u:qX7@zW8#vY9@h:-1",
                     "unix://u:qX7@zW8#vY9@",
                     "redis+sentinel://u:qX7@zW8#vY9@h:0/m",
                     "redis+sentinel://u:qX7@zW8/vY9@h",
                     "redis+sentinel://u:qX7@zW8#vY9@[::1/m",
                     "redis+sentinel://u:qX7@zW8#vY9@a:1,,b:2/m",
                     "redis+sentinel://u:qX7@zW8#vY9@h/m/x",
                     "redis:/u:qX7@zW8#vY9@h",
                     "redis:///u:qX7@zW8#vY9@h",
                     "redis://u:qX7%40zW8%23vY9@h:0",
                     "redis://u:qX7zW8?vY9@h:6379",
                     "redis://h?password=qX7@zW8#vY9&bogus"}) {
        config c;
        config_error err;
        BOOST_TEST(!parse_url(url, c, err), url);
        for (auto piece : {"qX7", "zW8", "vY9"})
            BOOST_TEST(err.message.find(piece) == std::string::npos, url << " -> " << err.message);
    }
}

BOOST_AUTO_TEST_CASE(json_sentinel)
{
    auto c = json_ok(
        R"({"sentinel": {"master": "mm", "nodes": ["127.0.0.1:1", "h2"], "password": "sp"}, "password": "pw"})");
    BOOST_TEST(c.sentinel.master_name == "mm");
    BOOST_TEST_REQUIRE(c.sentinel.nodes.size() == 2u);
    BOOST_TEST(c.sentinel.nodes[0].port == 1);
    BOOST_TEST(c.sentinel.nodes[1].port == 26379);
    BOOST_TEST(c.sentinel.password == "sp");
    BOOST_TEST(c.password == "pw");
    json_bad(R"({"sentinel": {"master": "mm"}})", error::invalid_option, "sentinel");
    json_bad(R"({"sentinel": {"master": "mm", "nodes": "h:1"}})", error::invalid_option, "sentinel.nodes");
    json_bad(R"({"sentinel": {"master": "mm", "nodes": ["h:1"], "quorum": 2}})", error::invalid_option,
             "sentinel.quorum");
    json_bad(R"({"sentinel": {"master": "mm", "nodes": ["h:99999"]}})", error::invalid_port, "port");
}

BOOST_AUTO_TEST_CASE(duration)
{
    std::chrono::milliseconds d{-1};
    BOOST_TEST(parse_duration("250ms", d));
    BOOST_TEST(d.count() == 250);
    BOOST_TEST(parse_duration("5s", d));
    BOOST_TEST(d.count() == 5000);
    BOOST_TEST(parse_duration("2m", d));
    BOOST_TEST(d.count() == 120000);
    BOOST_TEST(parse_duration("1h", d));
    BOOST_TEST(d.count() == 3600000);
    BOOST_TEST(parse_duration("1500", d));
    BOOST_TEST(d.count() == 1500);
    BOOST_TEST(parse_duration("0", d));
    BOOST_TEST(d.count() == 0);
    BOOST_TEST(parse_duration("0s", d));
    BOOST_TEST(d.count() == 0);

    d = 77ms;
    for (std::string_view bad : {"", "ms", "s", "5 s", " 5s", "5S", "5sec", "-5s", "+5s", "1.5s", "5d", "5us", "0x10",
                                 "99999999999999999999", "9223372036854775807h", "5s5"}) {
        BOOST_TEST(!parse_duration(bad, d), "'" << bad << "' must be rejected");
        BOOST_TEST(d.count() == 77, "'" << bad << "' must leave the output alone");
    }
    // The largest representable value in each unit still parses; one past overflows.
    BOOST_TEST(parse_duration("9223372036854775807", d));
    BOOST_TEST(parse_duration("2562047788015h", d));
    BOOST_TEST(!parse_duration("2562047788016h", d));
}

BOOST_AUTO_TEST_CASE(json_fields)
{
    auto c = json_ok(R"({"host": "redis.local", "port": 6380, "username": "u", "password": "p",
                         "database": 3, "client_name": "svc", "connect_timeout": "2s",
                         "request_timeout": 750, "reconnect_min": "10ms", "reconnect_max": 3000})");
    BOOST_TEST((c.kind == transport::tcp));
    BOOST_TEST(c.host == "redis.local");
    BOOST_TEST(c.port == 6380);
    BOOST_TEST(c.username == "u");
    BOOST_TEST(c.password == "p");
    BOOST_TEST(c.database == 3);
    BOOST_TEST(c.client_name == "svc");
    BOOST_TEST(c.connect_timeout.count() == 2000);
    BOOST_TEST(c.request_timeout.count() == 750);
    BOOST_TEST(c.reconnect_min.count() == 10);
    BOOST_TEST(c.reconnect_max.count() == 3000);

    c = json_ok(R"({"db": 7})");
    BOOST_TEST(c.database == 7);
}

BOOST_AUTO_TEST_CASE(json_url_then_overrides)
{
    auto c = json_ok(R"({"port": 7001, "url": "redis://a:b@h:7000/2", "database": 5})");
    BOOST_TEST(c.host == "h");
    BOOST_TEST(c.port == 7001);  // fields override the URL whatever their order
    BOOST_TEST(c.username == "a");
    BOOST_TEST(c.password == "b");
    BOOST_TEST(c.database == 5);
}

BOOST_AUTO_TEST_CASE(json_tls_and_unix)
{
    auto c =
        json_ok(R"({"host": "h", "tls": {"ca_file": "/ca", "cert_file": "/c", "key_file": "/k", "verify": false}})");
    BOOST_TEST((c.kind == transport::tls));
    BOOST_TEST(c.tls_ca_file == "/ca");
    BOOST_TEST(c.tls_cert_file == "/c");
    BOOST_TEST(c.tls_key_file == "/k");
    BOOST_TEST(!c.tls_verify);

    c = json_ok(R"({"path": "/tmp/r.sock"})");
    BOOST_TEST((c.kind == transport::unix_socket));
    BOOST_TEST(c.path == "/tmp/r.sock");

    c = json_ok(R"({"url": "unix:///tmp/a.sock", "host": "h"})");
    BOOST_TEST((c.kind == transport::tcp));
    BOOST_TEST(c.host == "h");
}

BOOST_AUTO_TEST_CASE(json_unknown_field)
{
    json_bad(R"({"hostname": "h"})", error::invalid_option, "hostname");
    json_bad(R"({"host": "h", "tls": {"ca": "/ca"}})", error::invalid_option, "tls.ca");
}

BOOST_AUTO_TEST_CASE(json_wrong_types)
{
    json_bad(R"([1, 2])", error::invalid_option, "object");
    json_bad(R"("redis://h")", error::invalid_option, "object");
    json_bad(R"({"url": 5})", error::invalid_option, "url");
    json_bad(R"({"host": 5})", error::invalid_option, "host");
    json_bad(R"({"password": null})", error::invalid_option, "password");
    json_bad(R"({"username": ["a"]})", error::invalid_option, "username");
    json_bad(R"({"client_name": true})", error::invalid_option, "client_name");
    json_bad(R"({"path": 1})", error::invalid_option, "path");
    json_bad(R"({"tls": true})", error::invalid_option, "tls");
    json_bad(R"({"tls": {"verify": "yes"}})", error::invalid_option, "tls.verify");
    json_bad(R"({"tls": {"ca_file": 1}})", error::invalid_option, "tls.ca_file");
}

BOOST_AUTO_TEST_CASE(json_bad_values)
{
    json_bad(R"({"port": 0})", error::invalid_port, "port");
    json_bad(R"({"port": 70000})", error::invalid_port, "port");
    json_bad(R"({"port": "6379"})", error::invalid_port, "port");
    json_bad(R"({"port": 6379.5})", error::invalid_port, "port");
    json_bad(R"({"database": -1})", error::invalid_database, "database");
    json_bad(R"({"database": "1"})", error::invalid_database, "database");
    json_bad(R"({"db": 4294967296})", error::invalid_database, "db");
    json_bad(R"({"connect_timeout": "5 seconds"})", error::invalid_duration, "connect_timeout");
    json_bad(R"({"request_timeout": -1})", error::invalid_duration, "request_timeout");
    json_bad(R"({"request_timeout": 1.5})", error::invalid_duration, "request_timeout");
    json_bad(R"({"reconnect_max": false})", error::invalid_duration, "reconnect_max");
    // Errors from an embedded URL come through with their own code.
    json_bad(R"({"url": "ftp://h"})", error::unsupported_scheme, "ftp");
    json_bad(R"({"url": "redis://h:0"})", error::invalid_port, "port");
}

BOOST_AUTO_TEST_CASE(error_messages_say_what_to_do)
{
    for (auto e : {error::invalid_url, error::unsupported_scheme, error::invalid_port, error::invalid_database,
                   error::invalid_option, error::invalid_duration}) {
        auto ec = make_error_code(e);
        BOOST_TEST(std::string(ec.category().name()) == "dlock");
        BOOST_TEST(!ec.message().empty());
        BOOST_TEST(ec.message() != "unknown dlock error");
    }
}

BOOST_AUTO_TEST_SUITE_END()
