// SPDX-License-Identifier: BSL-1.0
// memcached's meta protocol and the lock recipe without a server: encoding, incremental
// parsing (split anywhere), the lock item's reading, TTL rules, URLs.
#include <dlock/error.hpp>
#include <dlock/memcached/config.hpp>

#include "memcached/protocol.hpp"
#include "memcached/recipe.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
namespace proto = dlock::memcached::proto;
namespace recipe = dlock::memcached::recipe;
using proto::reply;

namespace {

std::vector<reply> parse_all(const std::string& bytes, std::size_t chunk, boost::system::error_code& ec)
{
    proto::parser p;
    std::vector<reply> out;
    for (std::size_t i = 0; i < bytes.size() && !ec; i += chunk) {
        p.feed(bytes.substr(i, chunk));
        while (auto r = p.next(ec))
            out.push_back(std::move(*r));
    }
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memcached_protocol)

BOOST_AUTO_TEST_CASE(commands_encode_as_meta_text)
{
    auto k = proto::encode_key("dlock:lock:job");
    BOOST_TEST(!k.base64);
    BOOST_TEST(proto::mg(k, "v c t") == "mg dlock:lock:job v c t\r\n");
    BOOST_TEST(proto::ms(k, "tok 7", "T6 ME") == "ms dlock:lock:job 5 T6 ME\r\ntok 7\r\n");
    BOOST_TEST(proto::md(k, "C42") == "md dlock:lock:job C42\r\n");
    BOOST_TEST(proto::md(k, "") == "md dlock:lock:job\r\n");
    BOOST_TEST(proto::ma(k, "N0 J1 v") == "ma dlock:lock:job N0 J1 v\r\n");
    BOOST_TEST(proto::mn() == "mn\r\n");
}

BOOST_AUTO_TEST_CASE(keys_with_spaces_go_base64_and_long_keys_are_refused)
{
    auto k = proto::encode_key("dlock:lock:a b");
    BOOST_TEST(k.base64);
    BOOST_TEST(k.text == "ZGxvY2s6bG9jazphIGI=");
    BOOST_TEST(proto::mg(k, "v") == "mg ZGxvY2s6bG9jazphIGI= b v\r\n");
    BOOST_TEST(proto::encode_key(std::string(250, 'x')).text.size() == 250u);
    BOOST_TEST(proto::encode_key(std::string(251, 'x')).text.empty());
    BOOST_TEST(proto::encode_key("").text.empty());
    BOOST_TEST(proto::encode_key("\xc3\xa9t\xc3\xa9").base64);
}

BOOST_AUTO_TEST_CASE(replies_parse_whole_or_split_anywhere)
{
    const std::string bytes = "VA 7 c3 t5\r\ntoken 1\r\nHD c3\r\nNS c0\r\nEX\r\nNF\r\nEN\r\nMN\r\nVA 0\r\n\r\n";
    for (std::size_t chunk : {bytes.size(), std::size_t{1}, std::size_t{3}, std::size_t{7}}) {
        boost::system::error_code ec;
        auto rs = parse_all(bytes, chunk, ec);
        BOOST_TEST(!ec);
        BOOST_REQUIRE(rs.size() == 8u);
        BOOST_TEST((rs[0].k == reply::kind::va));
        BOOST_TEST(rs[0].data == "token 1");
        BOOST_TEST(rs[0].number('c').value() == 3);
        BOOST_TEST(rs[0].number('t').value() == 5);
        BOOST_TEST(!rs[0].flag('k').has_value());
        BOOST_TEST((rs[1].k == reply::kind::hd));
        BOOST_TEST((rs[2].k == reply::kind::ns));
        BOOST_TEST((rs[3].k == reply::kind::ex));
        BOOST_TEST((rs[4].k == reply::kind::nf));
        BOOST_TEST((rs[5].k == reply::kind::en));
        BOOST_TEST((rs[6].k == reply::kind::mn));
        BOOST_TEST(rs[7].data.empty());
    }
}

BOOST_AUTO_TEST_CASE(error_lines_and_nonsense)
{
    boost::system::error_code ec;
    auto rs = parse_all("ERROR\r\nCLIENT_ERROR bad data chunk\r\nSERVER_ERROR out of memory\r\n", 4, ec);
    BOOST_TEST(!ec);
    BOOST_REQUIRE(rs.size() == 3u);
    BOOST_TEST(recipe::error_of(rs[0]) == dlock::error::protocol_error);
    BOOST_TEST(recipe::error_of(rs[1]) == dlock::error::invalid_request);
    BOOST_TEST(recipe::error_of(rs[2]) == dlock::error::server_busy);
    BOOST_TEST(rs[2].text == "SERVER_ERROR out of memory");
    // Redis's answer to `mn`, a bad size, a value without its terminator: not memcached.
    for (std::string bad : {"-ERR unknown command 'mn'\r\n", "VA x\r\n", "VA 2\r\nabcd\r\n", "+OK\r\n"}) {
        boost::system::error_code e;
        parse_all(bad, bad.size(), e);
        BOOST_TEST(e == dlock::error::protocol_error, bad);
    }
    // A line that never ends is not waited for forever.
    boost::system::error_code e;
    parse_all(std::string(10000, 'x'), 10000, e);
    BOOST_TEST(e == dlock::error::protocol_error);
}

BOOST_AUTO_TEST_CASE(the_lock_item_reads_back)
{
    boost::system::error_code ec;
    auto rs = parse_all("VA 10 c12 t6\r\nmy token 4\r\nEN\r\nVA 5 c1\r\nhello\r\n", 64, ec);
    BOOST_REQUIRE(rs.size() == 3u);
    recipe::lock_view v;
    BOOST_TEST(!recipe::read_lock(rs[0], v));
    BOOST_TEST(v.present);
    BOOST_TEST(v.owner == "my token");
    BOOST_TEST(v.fence == 4u);
    BOOST_TEST(v.cas == 12);
    BOOST_TEST(v.ttl_s == 6);
    BOOST_TEST(recipe::holder_ttl(v) == 5000ms);  // the extra second is ours, not the holder's
    BOOST_TEST(!recipe::read_lock(rs[1], v));
    BOOST_TEST(!v.present);
    BOOST_TEST(recipe::holder_ttl(v) == -1ms);
    BOOST_TEST(recipe::read_lock(rs[2], v) == dlock::error::invalid_request);  // someone else's item
    auto taking = parse_all("VA 5 c3 t6\r\ntok 0\r\n", 64, ec);                // being taken: its fence not set yet
    BOOST_TEST(!recipe::read_lock(taking[0], v));
    BOOST_TEST(v.present);
    BOOST_TEST(v.fence == 0u);
    std::uint64_t counter = 0;
    auto cs = parse_all("VA 2\r\n17\r\nVA 1\r\n0\r\n", 64, ec);
    BOOST_TEST(!recipe::read_counter(cs[0], counter));
    BOOST_TEST(counter == 17u);
    BOOST_TEST(recipe::read_counter(cs[1], counter) == dlock::error::invalid_request);
}

BOOST_AUTO_TEST_CASE(ttls_are_whole_seconds_from_two_and_one_more_at_the_server)
{
    BOOST_TEST(recipe::valid_ttl(2s));
    BOOST_TEST(recipe::valid_ttl(30s));
    BOOST_TEST(!recipe::valid_ttl(1s));
    BOOST_TEST(!recipe::valid_ttl(2500ms));
    BOOST_TEST(!recipe::valid_ttl(std::chrono::hours(24 * 30)));
    BOOST_TEST(recipe::valid_ttl(recipe::max_ttl));
    BOOST_TEST(recipe::ttl_flag(30s) == "T31");
    BOOST_TEST(recipe::value("tok", 9) == "tok 9");
}

BOOST_AUTO_TEST_CASE(urls)
{
    dlock::memcached::config c;
    dlock::memcached::config_error err;
    BOOST_TEST(dlock::memcached::parse_url("memcached://a:1,b,[::1]:3?ns=x&timeout=2s&connect_timeout=500ms", c, err),
               err.message);
    BOOST_REQUIRE(c.servers.size() == 3u);
    BOOST_TEST(c.servers[0].host == "a");
    BOOST_TEST(c.servers[0].port == 1);
    BOOST_TEST(c.servers[1].port == 11211);
    BOOST_TEST(c.servers[2].host == "::1");
    BOOST_TEST(c.ns == "x");
    BOOST_TEST(c.request_timeout == 2000ms);
    BOOST_TEST(c.connect_timeout == 500ms);
    BOOST_TEST(dlock::memcached::to_url(c) == "memcached://a:1,b:11211,[::1]:3");
    struct bad_case {
        const char* url;
        dlock::error code;
    };
    for (auto [url, code] :
         {bad_case{"redis://a", dlock::error::unsupported_scheme}, bad_case{"memcached://", dlock::error::invalid_url},
          bad_case{"memcached://a:0", dlock::error::invalid_port},
          bad_case{"memcached://a:x", dlock::error::invalid_port},
          bad_case{"memcached://a:", dlock::error::invalid_port}, bad_case{"memcached://a,", dlock::error::invalid_url},
          bad_case{"memcached://a,a:11211", dlock::error::invalid_url},
          bad_case{"memcached://u:p@a", dlock::error::invalid_url},
          bad_case{"memcached://a/x", dlock::error::invalid_url},
          bad_case{"memcached://a?lease=5s", dlock::error::invalid_option},
          bad_case{"memcached://a?timeout=soon", dlock::error::invalid_duration},
          bad_case{"localhost:11211", dlock::error::invalid_url}}) {
        dlock::memcached::config d;
        BOOST_TEST(!dlock::memcached::parse_url(url, d, err), url);
        BOOST_TEST(err.code == code, url << ": " << err.message);
        BOOST_TEST(!err.message.empty());
    }
}

BOOST_AUTO_TEST_SUITE_END()
