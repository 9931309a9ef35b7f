// SPDX-License-Identifier: BSL-1.0
// Node lists (Redlock masters, cluster seeds): parsing, duplicates, and hidden passwords.
#include <dlock/error.hpp>

#include "redis/node_list.hpp"
#include "unit/print.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using dlock::error;
using dlock::redis::config;
using dlock::redis::config_error;
using dlock::redis::parse_nodes;
using dlock::redis::parse_nodes_json;

namespace {

std::vector<config> nodes_ok(std::string_view text)
{
    std::vector<config> out;
    config_error err;
    BOOST_TEST_REQUIRE(parse_nodes(text, out, err), text << ": " << err.message);
    return out;
}

// Expects a failure with `code` whose message mentions every one of `parts`.
std::string nodes_bad(std::string_view text, error code, std::vector<std::string> parts = {})
{
    std::vector<config> out;
    config_error err;
    BOOST_TEST_CONTEXT("node list " << text)
    {
        BOOST_TEST(!parse_nodes(text, out, err));
        BOOST_TEST(err.code == code, err.code.message() << " / " << err.message);
        for (const auto& p : parts)
            BOOST_TEST(err.message.find(p) != std::string::npos, "message '" << err.message << "' names " << p);
        BOOST_TEST(out.empty());
    }
    return err.message;
}

bool has(const std::string& s, std::string_view part)
{
    return s.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(node_list_suite)

BOOST_AUTO_TEST_CASE(comma_separated_and_json)
{
    auto n = nodes_ok(" redis://127.0.0.1:7001, redis://127.0.0.1:7002,redis://h3:7003 ");
    BOOST_TEST_REQUIRE(n.size() == 3u);
    BOOST_TEST(n[1].port == 7002);
    BOOST_TEST(n[2].host == "h3");
    n = nodes_ok(R"(["redis://a:1", {"host": "b", "port": 2}])");
    BOOST_TEST_REQUIRE(n.size() == 2u);
    BOOST_TEST(n[1].host == "b");
    // Raw passwords with ',' are not supported in a comma list, but '@', '#', '/' are.
    n = nodes_ok("redis://u:p@ss#1@a:1,redis://u:p/ss@b:2");
    BOOST_TEST(n[0].password == "p@ss#1");
    BOOST_TEST(n[1].password == "p/ss");
    BOOST_TEST(n[1].host == "b");
}

BOOST_AUTO_TEST_CASE(bad_lists)
{
    nodes_bad("redis://a:1,redis://u:secret@b:99999", error::invalid_port, {"element 2 of 2", "port"});
    nodes_bad("redis://a:1,,redis://b:2", error::invalid_url, {"element 2 of 3", "empty"});
    nodes_bad(R"(["redis://a:1", 7])", error::invalid_option, {"element 2 of 2"});
    nodes_bad(R"([{"host": "a", "prot": 1}])", error::invalid_option, {"prot"});
    nodes_bad("[", error::invalid_option, {"JSON"});
    nodes_bad("", error::invalid_url, {"empty"});
    std::vector<config> out;
    config_error err;
    BOOST_TEST(!parse_nodes_json(boost::json::parse("[]"), out, err));
}

BOOST_AUTO_TEST_CASE(the_same_server_twice_is_refused)
{
    nodes_bad("redis://a:1,redis://a:1", error::invalid_option,
              {"element 2 of 2", "same server", "a:1", "element 1", "once"});
    // After normalisation: default port, database, scheme, case, IPv6 spelling, trailing dot.
    nodes_bad("redis://127.0.0.1:6379,redis://127.0.0.1:6379/0", error::invalid_option, {"same server"});
    nodes_bad("redis://localhost,redis://b:1,redis://localhost:6379", error::invalid_option,
              {"element 3 of 3", "element 1", "localhost:6379"});
    nodes_bad("redis://h:1/0,redis://h:1/3", error::invalid_option, {"same server"});
    nodes_bad("redis://h:1,rediss://h:1", error::invalid_option, {"same server"});
    nodes_bad("redis://Host.Example:1,redis://host.example.:1", error::invalid_option, {"same server"});
    nodes_bad("redis://[::1]:1,redis://[0:0::1]:1", error::invalid_option, {"same server", "[::1]:1"});
    nodes_bad("unix:///tmp/r.sock,unix:///tmp/./r.sock", error::invalid_option, {"same server", "unix:/tmp"});
    nodes_bad(R"(["redis://a:1", {"host": "a", "port": 1}])", error::invalid_option, {"element 2 of 2", "a:1"});
    // Different servers pass: another port, another host, another socket; names are not resolved.
    BOOST_TEST(nodes_ok("redis://a:1,redis://a:2,redis://b:1").size() == 3u);
    BOOST_TEST(nodes_ok("redis://localhost,redis://127.0.0.1").size() == 2u);
    BOOST_TEST(nodes_ok("unix:///a.sock,unix:///b.sock").size() == 2u);
}

BOOST_AUTO_TEST_CASE(sentinel_masters)
{
    config a, b;
    a.sentinel.master_name = b.sentinel.master_name = "m";
    a.sentinel.nodes = {{"s1", 26379}, {"s2", 26379}};
    b.sentinel.nodes = {{"S2", 26379}, {"s3", 26379}};
    BOOST_TEST(dlock::redis::same_server(a, b));  // a sentinel in common answers for both
    b.sentinel.nodes = {{"s3", 26379}};
    BOOST_TEST(!dlock::redis::same_server(a, b));
    b.sentinel.nodes = a.sentinel.nodes;
    b.sentinel.master_name = "other";
    BOOST_TEST(!dlock::redis::same_server(a, b));
    config plain;
    BOOST_TEST(!dlock::redis::same_server(a, plain));
}

BOOST_AUTO_TEST_CASE(messages_never_show_passwords)
{
    for (auto text : {"redis://u:s3cret@a:1,redis://u:s3cret@a:1",
                      "redis://a:1?password=s3cret,redis://a:1/0?password=s3cret", "redis://a:1,redis://u:s3cret@b:0",
                      "redis://a:1,redis://u:s3@cret@b:0", "redis://a:1,redis://b:2?password=s3cret&bogus",
                      "redis://u:s3#cret@h,redis://h:6379", R"(["redis://u:s3cret@a:1", "redis://:s3cret@a:1"])",
                      R"(["redis://u:s3cret@a:1", {"host": "a", "port": 1, "password": "s3cret"}])"}) {
        std::vector<config> out;
        config_error err;
        BOOST_TEST(!parse_nodes(text, out, err), text);
        BOOST_TEST(!has(err.message, "s3"), text << " -> " << err.message);
        BOOST_TEST(!has(err.message, "cret"), text << " -> " << err.message);
    }
}

BOOST_AUTO_TEST_SUITE_END()
