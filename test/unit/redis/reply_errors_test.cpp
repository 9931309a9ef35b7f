// SPDX-License-Identifier: BSL-1.0
// The one table from server error replies to dlock codes, and the script reply decoders'
// refusal of impossible values.
#include <dlock/error.hpp>

#include "redis/reply_errors.hpp"
#include "redis/script_replies.hpp"
#include "unit/print.hpp"

#include <boost/test/unit_test.hpp>

using dlock::error;
using dlock::detail::error_from_reply;

BOOST_AUTO_TEST_SUITE(reply_errors)

BOOST_AUTO_TEST_CASE(each_family_maps_to_its_code)
{
    BOOST_TEST(error_from_reply("NOPERM User limited has no permissions to run the 'evalsha' command") ==
               error::permission_denied);
    BOOST_TEST(error_from_reply("WRONGTYPE Operation against a key holding the wrong kind of value script: x") ==
               error::wrong_type);
    for (auto text : {"LOADING Redis is loading the dataset in memory", "BUSY Redis is busy running a script",
                      "TRYAGAIN Multiple keys request during rehashing of slot", "MASTERDOWN Link with MASTER is down",
                      "CLUSTERDOWN The cluster is down", "READONLY You can't write against a read only replica.",
                      "ERR Script attempted to access a non local key in a cluster node script: 08, on "
                      "@user_script:1."}) {
        BOOST_TEST(error_from_reply(text) == error::server_busy, text);
        BOOST_TEST(dlock::is_transient(error_from_reply(text)));
    }
    BOOST_TEST(error_from_reply("ERR invalid expire time in 'pexpire' command") == error::invalid_lease);
    BOOST_TEST(error_from_reply("ERR value is not an integer or out of range") == error::invalid_lease);
    BOOST_TEST(error_from_reply("ERR unknown command 'EVALSHA'") == error::server_error);
    BOOST_TEST(error_from_reply("BUSYKEY Target key name already exists.") == error::server_error);
    BOOST_TEST(error_from_reply("") == error::server_error);
    BOOST_TEST(!dlock::is_transient(error_from_reply("NOPERM x")));
    BOOST_TEST(!dlock::is_transient(error_from_reply("ERR x")));
}

BOOST_AUTO_TEST_CASE(a_redis_6_script_wrapper_is_read_through)
{
    BOOST_TEST(error_from_reply("ERR Error running script (call to f_0123): @user_script:3: WRONGTYPE Operation "
                                "against a key holding the wrong kind of value") == error::wrong_type);
    BOOST_TEST(error_from_reply("ERR Error running script (call to f_0123): out of memory") == error::server_error);
}

BOOST_AUTO_TEST_CASE(a_negative_fencing_token_is_a_protocol_error)
{
    using dlock::redis::reply;
    using dlock::redis::reply_type;
    reply r{reply_type::array, 0, {}, {reply{reply_type::integer, 1, {}, {}}, reply{reply_type::integer, -5, {}, {}}}};
    dlock::acquire_result out;
    BOOST_TEST(dlock::detail::decode_acquire(r, std::chrono::milliseconds(1000), out) == error::protocol_error);
    r.elements[1].integer = 7;
    BOOST_TEST(!dlock::detail::decode_acquire(r, std::chrono::milliseconds(1000), out));
    BOOST_TEST(out.fencing_token == 7u);
    BOOST_TEST(out.granted_ttl.count() == 1000);

    reply st{reply_type::array,
             0,
             {},
             {reply{reply_type::string, 0, "me", {}}, reply{reply_type::integer, -1, {}, {}},
              reply{reply_type::integer, 10, {}, {}}, reply{reply_type::integer, 3, {}, {}}}};
    dlock::lock_status s;
    BOOST_TEST(dlock::detail::decode_status(st, s) == error::protocol_error);
}

BOOST_AUTO_TEST_CASE(the_ttl_bound)
{
    using std::chrono::milliseconds;
    BOOST_TEST(dlock::detail::valid_redis_ttl(milliseconds(1)));
    BOOST_TEST(dlock::detail::valid_redis_ttl(dlock::detail::redis_max_ttl));
    BOOST_TEST(!dlock::detail::valid_redis_ttl(dlock::detail::redis_max_ttl + milliseconds(1)));
    BOOST_TEST(!dlock::detail::valid_redis_ttl(milliseconds(0)));
    BOOST_TEST(!dlock::detail::valid_redis_ttl(milliseconds::max() / 2));
}

// A grant message is trusted only in the exact form the release script publishes.
BOOST_AUTO_TEST_CASE(grant_messages_in_the_scripts_form_only)
{
    dlock::grant_notice g;
    BOOST_TEST_REQUIRE(dlock::detail::parse_grant("1803 30000", g));
    BOOST_TEST(g.fencing_token == 1803u);
    BOOST_TEST(g.ttl.count() == 30000);
    BOOST_TEST(dlock::detail::parse_grant("18446744073709551615 1", g));  // the largest fence
    BOOST_TEST(g.fencing_token == 18446744073709551615u);
    for (const char* bad : {"", "1803", "1803 ", " 1803 30000", "1803  30000", "1803 30000 ", "1803 30000x", "0 30000",
                            "1803 0", "1803 -5", "-1 30000", "+1 30000", "1803 70368744177665",
                            "18446744073709551616 1", "released", "1803\t30000"})
        BOOST_TEST(!dlock::detail::parse_grant(bad, g), bad);
}

BOOST_AUTO_TEST_SUITE_END()
