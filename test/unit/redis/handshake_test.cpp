// SPDX-License-Identifier: BSL-1.0
// The Redis connection's handshake without a server (src/redis/handshake.*): the commands a
// config sends, and each step x reply: accepted, refused (AUTH's refusal and NOAUTH are
// auth_failed, the others handshake_failed), ROLE naming a demoted master.
#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>

#include "redis/handshake.hpp"
#include "unit/print.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using boost::system::error_code;
using dlock::redis::config;
using dlock::redis::reply;
using dlock::redis::reply_type;
using dlock::redis::detail::handshake;
using st = handshake::state;
using step = handshake::step;

namespace {

reply ok()
{
    return reply{reply_type::status, 0, "OK", {}};
}
reply err(std::string s)
{
    return reply{reply_type::error, 0, std::move(s), {}};
}
reply str(std::string s)
{
    return reply{reply_type::string, 0, std::move(s), {}};
}
reply num(long long v)
{
    return reply{reply_type::integer, v, {}, {}};
}
reply arr(std::vector<reply> e)
{
    return reply{reply_type::array, 0, {}, std::move(e)};
}
reply role_master()
{
    return arr({str("master"), num(1234), arr({})});
}
reply role_replica()
{
    return arr({str("slave"), str("10.0.0.1"), num(6379), str("connected"), num(1234)});
}

config bare()
{
    config c;
    c.client_name.clear();
    return c;
}
// Every step: AUTH user pw, SELECT 3, CLIENT SETNAME, ROLE.
config every_step(bool with_user = true)
{
    config c;
    if (with_user)
        c.username = "alice";
    c.password = "pw";
    c.database = 3;
    c.client_name = "me";
    c.host = "10.0.0.5";
    c.port = 6390;
    c.sentinel.master_name = "mymaster";
    c.sentinel.nodes = {{"127.0.0.1", 26379}};
    return c;
}

// The reply that lets `s` pass.
reply accepted(step s)
{
    return s == step::role ? role_master() : ok();
}

void check(const handshake& h, st s, error_code ec, const std::string& said)
{
    BOOST_TEST((h.current() == s), "state " << static_cast<int>(h.current()) << " != " << static_cast<int>(s));
    BOOST_TEST(h.done() == (s != st::pending));
    BOOST_TEST(h.error() == ec, h.error().message() << " != " << ec.message());
    BOOST_TEST(h.said() == said);
}

const std::string demoted = "Sentinel named 10.0.0.5:6390 as master 'mymaster' but its ROLE is ";

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_handshake)

BOOST_AUTO_TEST_CASE(what_each_config_sends)
{
    {
        handshake h(bare());
        BOOST_TEST(h.request().empty());
        BOOST_TEST(h.steps().empty());
        check(h, st::done, {}, "");
    }
    {
        handshake h(config{});  // the default client name
        BOOST_TEST(h.request() == "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$5\r\ndlock\r\n");
        BOOST_TEST((h.steps() == std::vector<step>{step::setname}));
        check(h, st::pending, {}, "");
    }
    {
        auto c = bare();
        c.password = "pw";
        BOOST_TEST(handshake(c).request() == "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n");
        c.username = "alice";
        BOOST_TEST(handshake(c).request() == "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$2\r\npw\r\n");
        c.password.clear();  // a user without a password sends no AUTH
        BOOST_TEST(handshake(c).request().empty());
    }
    {
        auto c = bare();
        c.database = 15;
        BOOST_TEST(handshake(c).request() == "*2\r\n$6\r\nSELECT\r\n$2\r\n15\r\n");
    }
    {
        handshake h(every_step());
        BOOST_TEST(h.request() == "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$2\r\npw\r\n"
                                  "*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"
                                  "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$2\r\nme\r\n"
                                  "*1\r\n$4\r\nROLE\r\n");
        BOOST_TEST((h.steps() == std::vector<step>{step::auth, step::select, step::setname, step::role}));
    }
}

// Each step x each reply, with every step configured and with only that step.
BOOST_AUTO_TEST_CASE(each_step_accepted_or_refused)
{
    const std::vector<step> all = {step::auth, step::select, step::setname, step::role};
    for (bool with_user : {true, false}) {
        for (std::size_t k = 0; k < all.size(); ++k) {
            BOOST_TEST_CONTEXT("step " << k << (with_user ? " with a user" : ""))
            {
                const config c = every_step(with_user);
                auto before = [&] {
                    handshake h(c);
                    for (std::size_t i = 0; i < k; ++i)
                        BOOST_TEST_REQUIRE((h.feed(accepted(all[i])) == st::pending));
                    return h;
                };
                {
                    auto h = before();
                    const st after = k + 1 == all.size() ? st::done : st::pending;
                    BOOST_TEST((h.feed(accepted(all[k])) == after));
                    check(h, after, {}, "");
                }
                {
                    auto h = before();
                    const error_code expected =
                            all[k] == step::auth ? error_code(dlock::error::auth_failed) : dlock::error::handshake_failed;
                    BOOST_TEST((h.feed(err("ERR something")) == st::refused));
                    check(h, st::refused, expected, "ERR something");
                }
                {
                    // NOAUTH at any step: the server wants a password we did not give.
                    auto h = before();
                    BOOST_TEST((h.feed(err("NOAUTH Authentication required.")) == st::refused));
                    check(h, st::refused, dlock::error::auth_failed, "NOAUTH Authentication required.");
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(refusals_as_servers_word_them)
{
    {
        auto c = bare();
        c.password = "wrong";
        handshake h(c);
        h.feed(err("WRONGPASS invalid username-password pair or user is disabled."));
        check(h, st::refused, dlock::error::auth_failed, "WRONGPASS invalid username-password pair or user is disabled.");
    }
    {
        // Redis before 6 given a username: AUTH with two arguments is a syntax error.
        auto c = bare();
        c.username = "alice";
        c.password = "pw";
        handshake h(c);
        h.feed(err("ERR wrong number of arguments for 'auth' command"));
        check(h, st::refused, dlock::error::auth_failed, "ERR wrong number of arguments for 'auth' command");
    }
    {
        // A password the server does not need: Redis 6 says so in an error.
        auto c = bare();
        c.password = "pw";
        handshake h(c);
        h.feed(err("ERR AUTH <password> called without any password configured for the default user."));
        BOOST_TEST(h.error() == dlock::error::auth_failed);
    }
    {
        auto c = bare();
        c.database = 1000;
        handshake h(c);
        h.feed(err("ERR DB index is out of range"));
        check(h, st::refused, dlock::error::handshake_failed, "ERR DB index is out of range");
    }
    {
        // No password configured, the server wants one: CLIENT SETNAME meets NOAUTH.
        handshake h(config{});
        h.feed(err("NOAUTH Authentication required."));
        check(h, st::refused, dlock::error::auth_failed, "NOAUTH Authentication required.");
    }
    {
        // A server where CLIENT is renamed away.
        handshake h(config{});
        h.feed(err("ERR unknown command 'CLIENT', with args beginning with: 'SETNAME' 'dlock' "));
        BOOST_TEST(h.error() == dlock::error::handshake_failed);
    }
}

BOOST_AUTO_TEST_CASE(role_through_sentinel)
{
    auto only_role = [] {
        config c = every_step();
        c.password.clear();
        c.username.clear();
        c.database = 0;
        c.client_name.clear();
        return c;
    };
    BOOST_TEST((handshake(only_role()).steps() == std::vector<step>{step::role}));
    const std::vector<std::pair<reply, std::string>> not_master = {
        {role_replica(), "slave"},
        {arr({str("sentinel"), arr({str("mymaster")})}), "sentinel"},
        {arr({}), "?"},
        {ok(), "?"},
        {num(1), "?"},
        {reply{}, "?"},
        {arr({num(1)}), ""},  // not a string: its text is empty
    };
    for (const auto& [r, role] : not_master) {
        BOOST_TEST_CONTEXT("ROLE is '" << role << "'")
        {
            handshake h(only_role());
            BOOST_TEST((h.feed(r) == st::not_master));
            check(h, st::not_master, dlock::error::handshake_failed, demoted + role);
        }
    }
    handshake h(only_role());
    BOOST_TEST((h.feed(role_master()) == st::done));
    check(h, st::done, {}, "");
    // Without Sentinel no ROLE is asked: a replica is as good as any server.
    auto direct = only_role();
    direct.sentinel = {};
    BOOST_TEST(handshake(direct).request().empty());
}

// Every final state x another reply: nothing changes.
BOOST_AUTO_TEST_CASE(final_states_stay)
{
    const config c = every_step();
    std::vector<std::pair<std::vector<reply>, st>> scripts = {
        {{ok(), ok(), ok(), role_master()}, st::done},
        {{err("WRONGPASS x")}, st::refused},
        {{ok(), err("ERR DB index is out of range")}, st::refused},
        {{ok(), ok(), ok(), role_replica()}, st::not_master},
    };
    for (const auto& [script, final_state] : scripts) {
        for (const auto& late : {ok(), err("NOAUTH late"), role_replica(), role_master()}) {
            handshake h(c);
            for (const auto& r : script)
                h.feed(r);
            const auto ec = h.error();
            const auto said = h.said();
            BOOST_TEST((h.current() == final_state));
            BOOST_TEST((h.feed(late) == final_state));
            check(h, final_state, ec, said);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
