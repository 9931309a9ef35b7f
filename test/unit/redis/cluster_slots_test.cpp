// SPDX-License-Identifier: BSL-1.0
// The sans-io cluster routing core: slot maps from CLUSTER SLOTS / SHARDS, redirection
// parsing, and the decision after each attempt.
#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/redis/store.hpp>

#include "redis/cluster_slots.hpp"
#include "unit/print.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using boost::system::error_code;
using dlock::redis::reply;
using dlock::redis::reply_type;
namespace d = dlock::redis::detail;

namespace dlock::redis::detail {
inline std::ostream& boost_test_print_type(std::ostream& os, const node_address& a)
{
    return os << a.to_string();
}
inline std::ostream& boost_test_print_type(std::ostream& os, step_kind k)
{
    return os << static_cast<int>(k);
}
inline std::ostream& boost_test_print_type(std::ostream& os, redirect_kind k)
{
    return os << static_cast<int>(k);
}
}  // namespace dlock::redis::detail

namespace {

reply str(std::string s)
{
    reply r;
    r.type = reply_type::string;
    r.str = std::move(s);
    return r;
}

reply num(long long v)
{
    reply r;
    r.type = reply_type::integer;
    r.integer = v;
    return r;
}

reply err(std::string s)
{
    reply r;
    r.type = reply_type::error;
    r.str = std::move(s);
    return r;
}

reply arr(std::vector<reply> els)
{
    reply r;
    r.type = reply_type::array;
    r.elements = std::move(els);
    return r;
}

// One CLUSTER SLOTS range: [first, last, [host, port, id], replica...]
reply range(long long first, long long last, std::string host, long long port, std::vector<reply> replicas = {})
{
    std::vector<reply> els{num(first), num(last), arr({str(std::move(host)), num(port), str("id")})};
    for (auto& r : replicas)
        els.push_back(std::move(r));
    return arr(std::move(els));
}

const d::node_address a1{"127.0.0.1", 7001}, a2{"127.0.0.1", 7002}, a3{"127.0.0.1", 7003};

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster_slots)

// The table-driven CRC16 against the bit-by-bit definition and against slots Redis reports
// (CLUSTER KEYSLOT): a wrong table would put a lock's keys in another slot than its server's.
BOOST_AUTO_TEST_CASE(key_slot_matches_redis)
{
    BOOST_TEST(dlock::key_slot("foo") == 12182u);
    BOOST_TEST(dlock::key_slot("bar") == 5061u);
    BOOST_TEST(dlock::key_slot("123456789") == 12739u);
    BOOST_TEST(dlock::key_slot("{user1000}.following") == dlock::key_slot("user1000"));
    auto bitwise = [](std::string_view s) {
        unsigned crc = 0;
        for (unsigned char c : s) {
            crc ^= unsigned(c) << 8;
            for (int i = 0; i < 8; ++i)
                crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
        }
        return crc & 16383u;
    };
    std::string s;
    for (unsigned i = 0; i < 2000; ++i) {
        char c = static_cast<char>((i * 7919u) % 256);  // every byte value, lengths 1..2000
        s.push_back(c == '{' ? 'x' : c);                // no hash tag: the whole key is hashed
        BOOST_TEST_REQUIRE(dlock::key_slot(s) == bitwise(s));
    }
}

BOOST_AUTO_TEST_CASE(addresses)
{
    auto a = d::parse_address("10.0.0.5:6379", "x");
    BOOST_REQUIRE(a);
    BOOST_TEST(a->host == "10.0.0.5");
    BOOST_TEST(a->port == 6379u);
    BOOST_TEST(a->to_string() == "10.0.0.5:6379");
    // Empty or unknown host: the host we asked.
    BOOST_TEST(d::parse_address(":7002", "127.0.0.1")->host == "127.0.0.1");
    BOOST_TEST(d::parse_address("?:7002", "h")->host == "h");
    // IPv6: the port follows the last colon; CLUSTER NODES' "@bus" suffix is dropped.
    BOOST_TEST(d::parse_address("::1:7002", "h")->host == "::1");
    BOOST_TEST(d::parse_address("127.0.0.1:7002@17002", "h")->port == 7002u);
    BOOST_TEST(!d::parse_address("127.0.0.1", "h"));
    BOOST_TEST(!d::parse_address("127.0.0.1:0", "h"));
    BOOST_TEST(!d::parse_address("127.0.0.1:65536", "h"));
    BOOST_TEST(!d::parse_address("127.0.0.1:12x", "h"));
    BOOST_TEST(!d::parse_address(":7002", ""));
}

BOOST_AUTO_TEST_CASE(empty_map_routes_nowhere)
{
    d::slot_map m;
    BOOST_TEST(m.empty());
    BOOST_TEST(m.master_of(0) == nullptr);
    BOOST_TEST(m.master_of(16383) == nullptr);
    BOOST_TEST(m.master_of(16384) == nullptr);
    BOOST_TEST(m.masters().empty());
}

BOOST_AUTO_TEST_CASE(from_cluster_slots)
{
    reply r = arr({range(0, 5460, "127.0.0.1", 7001, {arr({str("127.0.0.1"), num(7004), str("r")})}),
                   range(5461, 10922, "127.0.0.1", 7002), range(10923, 16383, "", 7003)});
    d::slot_map m;
    std::string why;
    BOOST_REQUIRE(d::parse_cluster_slots(r, "127.0.0.1", m, why));
    BOOST_TEST(m.covered() == 16384u);
    BOOST_TEST(*m.master_of(0) == a1);
    BOOST_TEST(*m.master_of(5460) == a1);
    BOOST_TEST(*m.master_of(5461) == a2);
    BOOST_TEST(*m.master_of(10922) == a2);
    BOOST_TEST(*m.master_of(10923) == a3);  // "" host: the node we asked
    BOOST_TEST(*m.master_of(16383) == a3);
    auto masters = m.masters();
    BOOST_REQUIRE(masters.size() == 3u);  // the replica (7004) is not a master
    BOOST_TEST(masters[0] == a1);
}

BOOST_AUTO_TEST_CASE(cluster_slots_partial_coverage_and_split_ranges)
{
    // One master with two ranges; a hole in the middle (slots not assigned).
    reply r = arr({range(0, 99, "127.0.0.1", 7001), range(200, 299, "127.0.0.1", 7001)});
    d::slot_map m;
    std::string why;
    BOOST_REQUIRE(d::parse_cluster_slots(r, "h", m, why));
    BOOST_TEST(m.covered() == 200u);
    BOOST_TEST(m.master_of(150) == nullptr);
    BOOST_TEST(*m.master_of(250) == a1);
    BOOST_TEST(m.masters().size() == 1u);
}

BOOST_AUTO_TEST_CASE(cluster_slots_bad_shapes)
{
    d::slot_map m;
    m.assign(7, a1);
    std::string why;
    BOOST_TEST(!d::parse_cluster_slots(err("ERR This instance has cluster support disabled"), "h", m, why));
    BOOST_TEST(why.find("not an array") != std::string::npos);
    BOOST_TEST(!d::parse_cluster_slots(arr({arr({num(0), num(16384), arr({str("h"), num(1)})})}), "h", m, why));
    BOOST_TEST(!d::parse_cluster_slots(arr({arr({num(10), num(5), arr({str("h"), num(1)})})}), "h", m, why));
    BOOST_TEST(!d::parse_cluster_slots(arr({arr({num(0), num(5), arr({str("h"), num(0)})})}), "h", m, why));
    BOOST_TEST(!d::parse_cluster_slots(arr({arr({num(0), num(5)})}), "h", m, why));
    BOOST_TEST(!d::parse_cluster_slots(arr({arr({num(0), num(5), arr({str(""), num(7001)})})}), "", m, why));
    // A failed parse leaves the previous map alone.
    BOOST_TEST(*m.master_of(7) == a1);
    BOOST_TEST(m.covered() == 1u);
}

BOOST_AUTO_TEST_CASE(from_cluster_shards)
{
    auto node = [](std::string ip, long long port, std::string role, std::string health = "online") {
        return arr({str("id"), str("abc"), str("port"), num(port), str("ip"), str(std::move(ip)), str("endpoint"),
                    str("?"), str("role"), str(std::move(role)), str("replication-offset"), num(1), str("health"),
                    str(std::move(health))});
    };
    reply r = arr({
        arr({str("slots"), arr({num(0), num(100), num(200), num(300)}), str("nodes"),
             arr({node("127.0.0.1", 7004, "replica"), node("127.0.0.1", 7001, "master")})}),
        // Slots as strings (early 7.0), a failed old master before the promoted one.
        arr({str("slots"), arr({str("101"), str("199")}), str("nodes"),
             arr({node("127.0.0.1", 7009, "master", "fail"), node("", 7002, "master")})}),
        // An empty master: no slots, ignored.
        arr({str("slots"), arr({}), str("nodes"), arr({node("127.0.0.1", 7003, "master")})}),
    });
    d::slot_map m;
    std::string why;
    BOOST_REQUIRE_MESSAGE(d::parse_cluster_shards(r, "127.0.0.1", m, why), why);
    BOOST_TEST(m.covered() == 301u);
    BOOST_TEST(*m.master_of(0) == a1);
    BOOST_TEST(*m.master_of(300) == a1);
    BOOST_TEST(*m.master_of(150) == a2);
    BOOST_TEST(m.master_of(301) == nullptr);
    BOOST_TEST(m.masters().size() == 2u);

    // A shard with slots but no usable master is an error, not a silent hole.
    reply bad = arr({arr({str("slots"), arr({num(0), num(1)}), str("nodes"), arr({node("h", 7004, "replica")})})});
    BOOST_TEST(!d::parse_cluster_shards(bad, "h", m, why));
    BOOST_TEST(!d::parse_cluster_shards(arr({arr({str("slots"), arr({num(0)}), str("nodes"), arr({})})}), "h", m, why));
}

BOOST_AUTO_TEST_CASE(moved_updates_one_entry)
{
    d::slot_map m;
    m.assign_range(0, 16383, a1);
    BOOST_TEST(m.covered() == 16384u);
    BOOST_TEST(m.assign(42, a2));
    BOOST_TEST(!m.assign(42, a2));  // no change
    BOOST_TEST(*m.master_of(42) == a2);
    BOOST_TEST(*m.master_of(41) == a1);
    BOOST_TEST(*m.master_of(43) == a1);
    BOOST_TEST(m.covered() == 16384u);
    BOOST_TEST(m.masters().size() == 2u);
    BOOST_TEST(!m.assign(16384, a2));
}

BOOST_AUTO_TEST_CASE(redirections)
{
    auto moved = d::parse_redirect("MOVED 3999 127.0.0.1:7002", "x");
    BOOST_TEST(moved.kind == d::redirect_kind::moved);
    BOOST_TEST(moved.slot == 3999u);
    BOOST_TEST(moved.target == a2);
    auto ask = d::parse_redirect("ASK 16383 :7003", "127.0.0.1");
    BOOST_TEST(ask.kind == d::redirect_kind::ask);
    BOOST_TEST(ask.slot == 16383u);
    BOOST_TEST(ask.target == a3);
    BOOST_TEST(d::parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot", "h").kind ==
               d::redirect_kind::tryagain);
    BOOST_TEST(d::parse_redirect("CLUSTERDOWN Hash slot not served", "h").kind == d::redirect_kind::down);
    // Not redirections: ordinary errors, and malformed ones.
    BOOST_TEST(d::parse_redirect("ERR unknown command", "h").kind == d::redirect_kind::none);
    BOOST_TEST(d::parse_redirect("MOVED", "h").kind == d::redirect_kind::none);
    BOOST_TEST(d::parse_redirect("MOVED 3999", "h").kind == d::redirect_kind::none);
    BOOST_TEST(d::parse_redirect("MOVED 16384 h:1", "h").kind == d::redirect_kind::none);
    BOOST_TEST(d::parse_redirect("MOVED x h:1", "h").kind == d::redirect_kind::none);
    BOOST_TEST(d::parse_redirect("MOVED 1 h", "h").kind == d::redirect_kind::none);
    BOOST_TEST(d::parse_redirect("MOVEDX 1 h:1", "h").kind == d::redirect_kind::none);
    BOOST_TEST(d::parse_redirect("", "h").kind == d::redirect_kind::none);
}

BOOST_AUTO_TEST_CASE(next_step_decisions)
{
    const error_code server = dlock::error::server_error;
    reply ok = num(1);
    // Success and ordinary errors go to the caller untouched.
    auto s = d::next_step({}, ok, a1, 1, 5);
    BOOST_TEST(s.kind == d::step_kind::done);
    BOOST_TEST(!s.refresh);
    s = d::next_step(server, err("ERR Error running script"), a1, 1, 5);
    BOOST_TEST(s.kind == d::step_kind::done);
    BOOST_TEST(!s.refresh);
    // MOVED: follow and refresh the whole map.
    s = d::next_step(server, err("MOVED 12 127.0.0.1:7002"), a1, 1, 5);
    BOOST_TEST(s.kind == d::step_kind::retry_moved);
    BOOST_TEST(s.target == a2);
    BOOST_TEST(s.refresh);
    // ASK: follow once, the map stays (the slot is only migrating).
    s = d::next_step(server, err("ASK 12 :7003"), a1, 2, 5);
    BOOST_TEST(s.kind == d::step_kind::retry_ask);
    BOOST_TEST(s.target == a3);
    BOOST_TEST(!s.refresh);
    // TRYAGAIN: wait and route again; CLUSTERDOWN also re-reads the map.
    s = d::next_step(server, err("TRYAGAIN Multiple keys"), a1, 1, 5);
    BOOST_TEST(s.kind == d::step_kind::retry_later);
    BOOST_TEST(!s.refresh);
    s = d::next_step(server, err("CLUSTERDOWN The cluster is down"), a1, 1, 5);
    BOOST_TEST(s.kind == d::step_kind::retry_later);
    BOOST_TEST(s.refresh);
    // The bound: the attempt that reaches the limit fails with server_error.
    s = d::next_step(server, err("MOVED 12 127.0.0.1:7002"), a1, 5, 5);
    BOOST_TEST(s.kind == d::step_kind::fail);
    BOOST_TEST((s.ec == dlock::error::server_error));
    BOOST_TEST(s.refresh);
    // TRYAGAIN past the limit (after an ASK to a target still importing) is not counted:
    // the caller waits it out for its time limit.
    s = d::next_step(server, err("TRYAGAIN Multiple keys"), a3, 5, 5);
    BOOST_TEST(s.kind == d::step_kind::retry_later);
    s = d::next_step(server, err("ASK 12 :7003"), a1, 5, 5);
    BOOST_TEST(s.kind == d::step_kind::fail);
    // A lost connection is reported, and the map re-read (a failover may follow).
    s = d::next_step(dlock::error::connection_lost, reply{}, a1, 1, 5);
    BOOST_TEST(s.kind == d::step_kind::done);
    BOOST_TEST(s.refresh);
    s = d::next_step(dlock::error::timeout, reply{}, a1, 1, 5);
    BOOST_TEST(s.refresh);
    // Cancellation and close teach nothing about the topology.
    s = d::next_step(boost::asio::error::operation_aborted, reply{}, a1, 1, 5);
    BOOST_TEST(s.kind == d::step_kind::done);
    BOOST_TEST(!s.refresh);
    s = d::next_step(dlock::error::closed, reply{}, a1, 1, 5);
    BOOST_TEST(!s.refresh);
}

BOOST_AUTO_TEST_SUITE_END()
