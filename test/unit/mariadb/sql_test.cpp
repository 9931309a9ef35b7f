// SPDX-License-Identifier: BSL-1.0
// The MariaDB recipe without a server: URLs, hex literals, statements, result decoding, error mapping.
#include <dlock/error.hpp>
#include <dlock/mariadb/config.hpp>

#include "mariadb/bell_sql.hpp"
#include "mariadb/election_latch_sql.hpp"
#include "mariadb/set_sql.hpp"
#include "mariadb/sql.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
namespace maria = dlock::mariadb;
namespace sql = dlock::mariadb::sql;

namespace {

sql::result sets(std::vector<std::vector<sql::row>> s)
{
    sql::result r;
    r.sets = std::move(s);
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mariadb_sql)

BOOST_AUTO_TEST_CASE(urls)
{
    maria::config c;
    maria::config_error err;
    BOOST_TEST(maria::parse_url(
        "mariadb://al%40x:p%3Aw@db.example:3307/locks?table=app.leases&connect_timeout=2s&wait_connections=2", c, err));
    BOOST_TEST(c.user == "al@x");
    BOOST_TEST(c.password == "p:w");
    BOOST_TEST(c.host == "db.example");
    BOOST_TEST(c.port == 3307);
    BOOST_TEST(c.database == "locks");
    BOOST_TEST(c.table == "app.leases");
    BOOST_TEST(c.connect_timeout == 2000ms);
    BOOST_TEST(c.wait_connections == 2u);
    BOOST_TEST(maria::to_url(c) == "mariadb://al@x@db.example:3307/locks");  // no password
    maria::config d;
    BOOST_TEST(maria::parse_url("mysql://u@[::1]/x", d, err));
    BOOST_TEST(d.host == "::1");
    BOOST_TEST(d.port == 3306);
    maria::config u;
    BOOST_TEST(maria::parse_url("mariadb://u:pw@%2Frun%2Fmysqld%2Fmysqld.sock/db", u, err));
    BOOST_TEST(u.host == "/run/mysqld/mysqld.sock");
    BOOST_TEST(maria::to_url(u) == "mariadb://u@%2Frun%2Fmysqld%2Fmysqld.sock/db");
    BOOST_TEST(!maria::parse_url("mariadb://u@h:99999/x", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_port);
    BOOST_TEST(!maria::parse_url("mariadb://u@h/x?table=a`;drop", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!maria::parse_url("mariadb://u@h/x?table=" + std::string(59, 'a'), d, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!maria::parse_url("mariadb://u@h/x?wait_connections=-1", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!maria::parse_url("mariadb://u@h/x?nope=1", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!maria::parse_url("postgresql://u@h/x", d, err));
    BOOST_TEST(err.code == dlock::error::unsupported_scheme);
    BOOST_TEST(!maria::parse_url("mariadb:///x", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_url);
    BOOST_TEST(!maria::parse_url("mariadb://u:a%00b@h/x", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_url);
    maria::config e;
    BOOST_TEST(maria::parse_url("mariadb://u@h/", e, err));  // the default database
    BOOST_TEST(e.database == "dlock");
}

BOOST_AUTO_TEST_CASE(url_errors_never_show_the_password)
{
    maria::config c;
    maria::config_error err;
    BOOST_TEST(!maria::parse_url("mariadb:/u:s3cret@h/db", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_url);
    BOOST_TEST(err.message == "not a mariadb URL (expected mariadb://user:password@host:port/db): 'mariadb:***@h/db'");
    // A raw '?' in the password: the rest of it would be read as an option (or a port).
    for (const char* url :
         {"mariadb://u:s3?cret@h/db", "mysql://u:s3cret?@h:3306/db", "mariadb://u:s3?@h/db?table=t"}) {
        BOOST_TEST(!maria::parse_url(url, c, err));
        BOOST_TEST(err.code == dlock::error::invalid_url);
        BOOST_TEST(err.message.find("s3") == std::string::npos, err.message);
    }
    BOOST_TEST(!maria::parse_url("mariadb://u:s3cret@/db", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_url);
    BOOST_TEST(err.message == "mariadb URL: no host in 'mariadb://u:***@/db'");
    BOOST_TEST(!maria::parse_url("mysql://u:s3cret@[::1/db", c, err));
    BOOST_TEST(err.message == "mariadb URL: unclosed '[' in '[::1'");
}

BOOST_AUTO_TEST_CASE(hex_literals_carry_any_byte)
{
    BOOST_TEST(sql::hex_literal("") == "X''");
    BOOST_TEST(sql::hex_literal("it's") == "X'69742773'");
    BOOST_TEST(sql::hex_literal(std::string("a\0\\'\"\xff", 6)) == "X'61005C2722FF'");
    // Whatever the name, the statement holds only hex digits between X' and '.
    std::string evil = "x'); DROP TABLE dlock_locks; -- \\' \x00";
    auto text = sql::acquire("dlock_locks", evil, "tok", 2s);
    BOOST_TEST(text.find("DROP") == std::string::npos);
    BOOST_TEST(text.find(sql::hex_literal(evil)) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(statements_quote_the_table_and_use_the_server_clock)
{
    BOOST_TEST(sql::quote_table("app.leases") == "`app`.`leases`");
    BOOST_TEST(sql::quote_sequence("leases") == "`leases_fence`");
    for (const auto& s : {sql::acquire("app.leases", "n", "t", 1500ms), sql::renew("app.leases", "n", "t", 1500ms),
                          sql::release("app.leases", "n", "t"), sql::force_release("app.leases", "n"),
                          sql::status("app.leases", "n")}) {
        BOOST_TEST(s.find("`app`.`leases`") != std::string::npos);
        BOOST_TEST(s.find("X'6E'") != std::string::npos);
        BOOST_TEST(s.find("UTC_TIMESTAMP(6)") != std::string::npos);
        BOOST_TEST(s.find("NOW()") == std::string::npos);  // never the session's time zone
    }
    auto acq = sql::acquire("leases", "n", "t", 1500ms);
    BOOST_TEST(acq.find("NEXTVAL(`leases_fence`)") != std::string::npos);
    // The fence is drawn holding the row (an UPDATE of a row newly ours, fence 0), never in
    // the INSERT's values, drawn before it waits for the row (issue 29).
    BOOST_TEST(acq.find("NEXTVAL") > acq.find("ON DUPLICATE KEY UPDATE"));
    BOOST_TEST(acq.find("NEXTVAL") > acq.find("UPDATE `leases` SET fence = NEXTVAL"));
    BOOST_TEST(acq.find("NEXTVAL", acq.find("NEXTVAL") + 1) == std::string::npos);
    BOOST_TEST(acq.find("WHERE name = X'6E' AND owner = X'74' AND fence = 0;") != std::string::npos);
    BOOST_TEST(acq.find("INTERVAL 1500000 MICROSECOND") != std::string::npos);
    BOOST_TEST(acq.find("ON DUPLICATE KEY UPDATE") != std::string::npos);
    BOOST_TEST(acq.find("GET_LOCK(") != std::string::npos);
    BOOST_TEST(sql::release("leases", "n", "t").find("RELEASE_LOCK(") != std::string::npos);
    BOOST_TEST(sql::wait("leases", "n", 2500ms).find(", 2.500), RELEASE_LOCK(") != std::string::npos);
    BOOST_TEST(sql::wait("leases", "n", 42ms).find(", 0.042)") != std::string::npos);
    BOOST_TEST(sql::signal_lock("app.leases", "X'6E'")
                   .find("CONCAT(CAST('app' AS BINARY), '.leases/', CAST(X'6E' AS BINARY))") != std::string::npos);
    auto setup = sql::schema_setup("app.leases");
    BOOST_TEST(setup.find("CREATE TABLE IF NOT EXISTS `app`.`leases`") != std::string::npos);
    BOOST_TEST(setup.find("CREATE SEQUENCE IF NOT EXISTS `app`.`leases_fence`") != std::string::npos);
    BOOST_TEST(setup.find("table_schema = 'app' AND table_name = 'leases'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(names_tokens_and_leases)
{
    BOOST_TEST(!sql::check_name("a"));
    BOOST_TEST(!sql::check_name(std::string("a\0b", 3)));  // bytes: a NUL is data
    BOOST_TEST(!sql::check_name(std::string(2000, 'x')));
    BOOST_TEST(sql::check_name("") == dlock::error::invalid_name);
    BOOST_TEST(sql::check_name(std::string(2001, 'x')) == dlock::error::invalid_name);
    BOOST_TEST(sql::check_token(std::string(256, 't')) == dlock::error::invalid_name);
}

BOOST_AUTO_TEST_CASE(errors)
{
    BOOST_TEST(!sql::error_of(0));
    BOOST_TEST(sql::error_of(1045) == dlock::error::auth_failed);
    BOOST_TEST(sql::error_of(1044) == dlock::error::permission_denied);
    BOOST_TEST(sql::error_of(1142) == dlock::error::permission_denied);
    BOOST_TEST(sql::error_of(1049) == dlock::error::handshake_failed);
    for (unsigned e : {2006u, 2013u, 1927u, 1053u}) {
        BOOST_TEST(sql::error_of(e) == dlock::error::connection_lost);
        BOOST_TEST(dlock::is_transient(sql::error_of(e)));
    }
    for (unsigned e : {1205u, 1213u, 1040u}) {
        BOOST_TEST(sql::error_of(e) == dlock::error::server_busy);
        BOOST_TEST(dlock::is_transient(sql::error_of(e)));
    }
    BOOST_TEST(sql::error_of(2003) == dlock::error::connect_failed);
    BOOST_TEST(sql::error_of(1064) == dlock::error::server_error);
    BOOST_TEST(!dlock::is_transient(sql::error_of(1045)));
}

BOOST_AUTO_TEST_CASE(decoding)
{
    using opt = std::optional<std::string>;
    dlock::acquire_result a;
    sql::holder_info h;
    std::optional<std::uint64_t> set;
    BOOST_TEST(sql::decode_acquire(sets({{{opt("1"), opt("7"), opt("1999"), opt("1"), opt("0")}}}), 2s, a, h, set));
    BOOST_TEST(a.acquired);
    BOOST_TEST(a.fencing_token == 7u);
    BOOST_TEST(a.granted_ttl == 2s);
    BOOST_TEST(!set);
    BOOST_TEST(sql::decode_acquire(sets({{{opt("0"), opt("7"), opt("1500"), opt("1"), opt("0")}}}), 2s, a, h, set));
    BOOST_TEST(!a.acquired);
    BOOST_TEST(a.holder_ttl == 1500ms);
    BOOST_TEST(h.signal);
    BOOST_TEST(sql::decode_acquire(sets({{{opt("0"), opt("7"), opt("1500"), opt("0"), opt("0")}}}), 2s, a, h, set));
    BOOST_TEST(!h.signal);
    // A live set's marker row: its fence column is the set's permits.
    BOOST_TEST(sql::decode_acquire(sets({{{opt("0"), opt("3"), opt("1500"), opt("0"), opt("1")}}}), 2s, a, h, set));
    BOOST_TEST((set && *set == 3u));
    BOOST_TEST(sql::decode_acquire(sets({{}}), 2s, a, h, set));  // gone meanwhile: try again now
    BOOST_TEST(!a.acquired);
    BOOST_TEST(a.holder_ttl == 0ms);
    BOOST_TEST(!set);
    BOOST_TEST(!sql::decode_acquire(sets({{{opt("x"), opt("7"), opt("1"), opt("1"), opt("0")}}}), 2s, a, h, set));
    BOOST_TEST(!sql::decode_acquire(sets({{{opt("1"), opt("7"), opt("1"), opt("1")}}}), 2s, a, h, set));
    BOOST_TEST(!sql::decode_acquire(sets({}), 2s, a, h, set));

    dlock::renew_result r;
    BOOST_TEST(sql::decode_renew(sets({{{opt("1")}}, {{opt()}}}), r));
    BOOST_TEST((r.owned && r.contended));
    BOOST_TEST(sql::decode_renew(sets({{{opt("0")}}, {{opt()}}}), r));
    BOOST_TEST((r.owned && !r.contended));
    BOOST_TEST(sql::decode_renew(sets({{{opt()}}, {{opt("1")}}}), r));
    BOOST_TEST(!r.owned);
    BOOST_TEST(!sql::decode_renew(sets({{{opt("1")}}}), r));

    bool released = false;
    BOOST_TEST(sql::decode_release(sets({{{opt("1")}}, {{opt("1")}}}), released));
    BOOST_TEST(released);
    BOOST_TEST(sql::decode_release(sets({{}, {{opt()}}}), released));
    BOOST_TEST(!released);

    dlock::lock_status s;
    BOOST_TEST(sql::decode_status(sets({{{opt("tok"), opt("9"), opt("120"), opt("1"), opt("2")}}}), s));
    BOOST_TEST((s.held && s.holder == "tok" && s.fencing_token == 9u && s.ttl == 120ms && s.queued == 2u));
    BOOST_TEST(sql::decode_status(sets({{{opt("tok"), opt("9"), opt("0"), opt("0"), opt("0")}}}), s));
    BOOST_TEST((!s.held && s.last_fencing_token == 9u));
    BOOST_TEST(!sql::decode_status(sets({{{opt("tok"), opt("9"), opt("0"), opt("0")}}}), s));

    bool marker = false;
    BOOST_TEST(sql::decode_force_release(sets({{{opt("1")}}, {{opt()}}, {{opt("0")}}}), released, marker));
    BOOST_TEST((released && !marker));
    BOOST_TEST(sql::decode_force_release(sets({{}, {{opt()}}, {{opt("1")}}}), released, marker));
    BOOST_TEST((!released && marker));

    BOOST_TEST(sql::decode_wait(sets({{{opt("1"), opt("1")}}}), released));
    BOOST_TEST(released);
    BOOST_TEST(sql::decode_wait(sets({{{opt("0"), opt("0")}}}), released));
    BOOST_TEST(!released);
    BOOST_TEST(sql::decode_wait(sets({{{opt(), opt()}}}), released));
    BOOST_TEST(!released);
}

// The doorbell's and the other primitives' results: rings taken out of any place in a reply
// (ids in order, nothing else touched), the sleeper's reading, and the sets', elections' and
// latches' rows, with the shapes they must not accept.
BOOST_AUTO_TEST_CASE(rings_and_the_primitives_results)
{
    using opt = std::optional<std::string>;
    auto r = sets({{{opt("1")}}, {{opt("dlock-ring"), opt("v1"), opt("12,5")}}, {{opt()}}});
    BOOST_TEST((sql::take_rings(r) == std::vector<std::uint64_t>{12, 5}));
    BOOST_TEST(r.sets.size() == 2u);
    auto none = sets({{{opt("dlock-ring"), opt("v1"), opt()}}, {{opt("dlock-ring"), opt("v2"), opt("3")}}});
    BOOST_TEST(sql::take_rings(none).empty());  // nobody enrolled; another shape is not a ring
    BOOST_TEST(none.sets.size() == 1u);

    dlock::mariadb::detail::bell_reading b;
    BOOST_TEST(
        sql::decode_bell(sets({{{opt("7"), opt("1"), opt("u1")}},
                               {{opt("n"), opt("2"), opt("tok"), opt("9")}, {opt("m"), opt("0"), opt(), opt()}}}),
                         b));
    BOOST_TEST(b.conn == 7u);
    BOOST_TEST(b.session == "u1");
    BOOST_TEST(b.rows.size() == 2u);
    BOOST_TEST((b.rows[0].owner == opt("tok") && b.rows[0].fence == 9u && b.rows[1].rings == 0u && !b.rows[1].owner));
    BOOST_TEST(sql::decode_bell(sets({{{opt("7"), opt("1"), opt("u1")}}}), b));  // killed before its rows: nothing read
    BOOST_TEST(b.conn == 0u);
    BOOST_TEST(!sql::decode_bell(sets({{{opt("x"), opt("1"), opt("u1")}}}), b));
    BOOST_TEST(!sql::decode_bell(sets({{{opt("7"), opt("1")}}}), b));

    dlock::acquire_result a;
    long long what = 0;
    BOOST_TEST(!sql::decode_set_acquire(sets({{{opt("1"), opt("42")}}}), 2s, a, what));
    BOOST_TEST((a.acquired && a.fencing_token == 42u));
    BOOST_TEST(!sql::decode_set_acquire(sets({{{opt("0"), opt("300")}}}), 2s, a, what));
    BOOST_TEST((!a.acquired && a.holder_ttl == 300ms));
    BOOST_TEST(sql::decode_set_acquire(sets({{{opt("-1"), opt("3")}}}), 2s, a, what) == dlock::error::kind_mismatch);
    BOOST_TEST(what == 3);
    BOOST_TEST(sql::decode_set_acquire(sets({{{opt("2"), opt("3")}}}), 2s, a, what) == dlock::error::protocol_error);
    BOOST_TEST(sql::decode_set_acquire(sets({}), 2s, a, what) == dlock::error::protocol_error);

    std::uint64_t remaining = 0;
    BOOST_TEST(!sql::decode_count_down(sets({{{opt("1"), opt("2")}}}), remaining));
    BOOST_TEST(remaining == 2u);
    BOOST_TEST(sql::decode_count_down(sets({{{opt("0"), opt("5")}}}), remaining) == dlock::error::count_mismatch);
    BOOST_TEST(remaining == 5u);
    dlock::latch_state ls;
    BOOST_TEST(sql::decode_latch_state(sets({{{opt("3"), opt("1")}}}), ls));
    BOOST_TEST((ls.count == 3u && ls.remaining == 2u));
    BOOST_TEST(!sql::decode_latch_state(sets({{{opt("3"), opt("4")}}}), ls));

    dlock::lock_status st;
    BOOST_TEST(sql::decode_leader(sets({{{opt("tok"), opt("9"), opt("100"), opt("1"), opt("0"), opt("v")}}}), st));
    BOOST_TEST((st.held && st.value == opt("v")));
    BOOST_TEST(sql::decode_leader(sets({{}}), st));
    BOOST_TEST(!st.held);
}

BOOST_AUTO_TEST_SUITE_END()
