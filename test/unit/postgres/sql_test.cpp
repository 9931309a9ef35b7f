// SPDX-License-Identifier: BSL-1.0
// The PostgreSQL recipe without a server: URLs, statements, result decoding, error mapping.
#include <dlock/error.hpp>
#include <dlock/postgres/config.hpp>

#include "postgres/sql.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
namespace pg = dlock::postgres;
namespace sql = dlock::postgres::sql;

BOOST_AUTO_TEST_SUITE(postgres_sql)

BOOST_AUTO_TEST_CASE(urls)
{
    pg::config c;
    pg::config_error err;
    BOOST_TEST(
        pg::parse_url("postgresql://al%40x:p%3Aw@db.example:6543/locks?table=app.leases&connect_timeout=2s", c, err));
    BOOST_TEST(c.user == "al@x");
    BOOST_TEST(c.password == "p:w");
    BOOST_TEST(c.host == "db.example");
    BOOST_TEST(c.port == 6543);
    BOOST_TEST(c.database == "locks");
    BOOST_TEST(c.table == "app.leases");
    BOOST_TEST(c.connect_timeout == 2000ms);
    BOOST_TEST(pg::to_url(c) == "postgresql://al@x@db.example:6543/locks");
    pg::config d;
    BOOST_TEST(pg::parse_url("postgres://u@[::1]/x", d, err));
    BOOST_TEST(d.host == "::1");
    BOOST_TEST(d.port == 5432);
    BOOST_TEST(!pg::parse_url("postgresql://u@h:99999/x", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_port);
    BOOST_TEST(!pg::parse_url("postgresql://u@h/x?table=a;drop", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!pg::parse_url("postgresql://u@h/x?nope=1", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!pg::parse_url("mysql://u@h/x", d, err));
    BOOST_TEST(err.code == dlock::error::unsupported_scheme);
    BOOST_TEST(!pg::parse_url("postgresql:///x", d, err));
    BOOST_TEST(err.code == dlock::error::invalid_url);
}

BOOST_AUTO_TEST_CASE(url_errors_never_show_the_password)
{
    pg::config c;
    pg::config_error err;
    // The whole URL in the message, the password hidden.
    BOOST_TEST(!pg::parse_url("postgresql://u:s3cret@/db", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_url);
    BOOST_TEST(err.message == "postgresql URL: no host in 'postgresql://u:***@/db'");
    BOOST_TEST(!pg::parse_url("postgresql:/u:s3cret@h/db", c, err));
    BOOST_TEST(err.message ==
               "not a postgresql URL (expected postgresql://user:password@host:port/db): 'postgresql:***@h/db'");
    // A raw '?' in the password: the rest of it would be read as an option (or a port).
    for (const char* url : {"postgresql://u:s3?cret@h/db", "postgresql://u:s3c?ret@h/db?table=t"}) {
        BOOST_TEST(!pg::parse_url(url, c, err));
        BOOST_TEST(err.code == dlock::error::invalid_url);
        BOOST_TEST(err.message.find("cret") == std::string::npos, err.message);
    }
    // Without a password, messages show what was typed.
    BOOST_TEST(!pg::parse_url("postgresql://u@/db", c, err));
    BOOST_TEST(err.message == "postgresql URL: no host in 'postgresql://u@/db'");
}

BOOST_AUTO_TEST_CASE(statements_bind_names_and_quote_the_table)
{
    auto st = sql::make_statements("app.leases");
    BOOST_TEST(sql::quote_table("app.leases") == "\"app\".\"leases\"");
    BOOST_TEST(sql::quote_sequence("leases") == "\"leases_fence\"");
    BOOST_TEST(sql::quote_queue("app.leases") == "\"app\".\"leases_queue\"");
    for (const auto* s : {&st.acquire, &st.renew, &st.release, &st.force_release, &st.status}) {
        BOOST_TEST(s->find("$1") != std::string::npos);
        BOOST_TEST(s->find("\"app\".\"leases\"") != std::string::npos);
        // Names and tokens are bound: no statement carries a quote other than its own literals.
        BOOST_TEST(s->find("'$") == std::string::npos);
    }
    BOOST_TEST(st.acquire.find("ON CONFLICT (name) DO UPDATE") != std::string::npos);
    // Every statement that draws a fence takes the name's turn first, and draws in it (issue 29).
    for (const auto* s : {&st.acquire, &st.release, &st.force_release}) {
        auto turn = s->find("pg_advisory_xact_lock(hashtextextended('\"app\".\"leases\"/' || $1::text, 0))");
        BOOST_TEST(turn != std::string::npos);
        BOOST_TEST(turn < s->find("nextval("));
    }
    BOOST_TEST(st.acquire.find("f AS (SELECT nextval('\"app\".\"leases_fence\"') AS v FROM turn)") !=
               std::string::npos);
    // Its rows are read (and locked) only once the turn is ours; a free name goes to the
    // first live waiter queued before the caller (FIFO past an expiry), told by a grant NOTIFY.
    BOOST_TEST(st.acquire.find("AS t WHERE (SELECT NOT k FROM turn) AND t.name = $1 FOR UPDATE OF t") !=
               std::string::npos);
    BOOST_TEST(st.acquire.find("pg_stat_get_activity(w.listener)") != std::string::npos);
    BOOST_TEST(st.acquire.find("pg_notify('dlock_grant'") != std::string::npos);
    BOOST_TEST(st.release.find("FROM turn, \"app\".\"leases\" AS t WHERE t.name = $1") != std::string::npos);
    BOOST_TEST(st.acquire.find("ON CONFLICT (name, token) DO UPDATE") != std::string::npos);  // queues once
    BOOST_TEST(st.acquire.find("\"app\".\"leases_queue\"") != std::string::npos);
    BOOST_TEST(st.acquire.find("clock_timestamp()") != std::string::npos);
    BOOST_TEST(st.renew.find("was_contended = t.contended, contended = false") != std::string::npos);
    for (const auto* s : {&st.release, &st.force_release}) {
        BOOST_TEST(s->find("pg_notify('dlock', d.name)") != std::string::npos);
        BOOST_TEST(s->find("pg_notify('dlock_grant'") != std::string::npos);
        BOOST_TEST(s->find("pg_stat_get_activity(q.listener)") != std::string::npos);  // live waiters only
        BOOST_TEST(s->find("FOR UPDATE OF q SKIP LOCKED") != std::string::npos);
        BOOST_TEST(s->find("nextval('\"app\".\"leases_fence\"')") != std::string::npos);
    }
    BOOST_TEST(st.release.find("t.owner = $2") != std::string::npos);
    BOOST_TEST(st.force_release.find("$2") == std::string::npos);
    BOOST_TEST(st.setup.find("CREATE SEQUENCE IF NOT EXISTS \"app\".\"leases_fence\"") != std::string::npos);
    BOOST_TEST(st.setup.find("CREATE TABLE IF NOT EXISTS \"app\".\"leases_queue\"") != std::string::npos);
    // A table of the previous version gains its column; ALTER only if missing (DML-only users).
    BOOST_TEST(st.setup.find("attname = 'was_contended'") != std::string::npos);
    BOOST_TEST(st.setup.find("ADD COLUMN IF NOT EXISTS was_contended") != std::string::npos);
    BOOST_TEST(sql::listen() == "LISTEN dlock; LISTEN dlock_grant");
}

BOOST_AUTO_TEST_CASE(decoding)
{
    sql::result r;
    r.rows = {{std::string("t"), std::string("42"), std::string("5000"), std::string("f")}};
    dlock::acquire_result a;
    std::optional<std::uint64_t> a_set = 7;
    BOOST_TEST(sql::decode_acquire(r, 5s, a, a_set));
    BOOST_TEST(a.acquired);
    BOOST_TEST(!a_set.has_value());
    BOOST_TEST(a.fencing_token == 42u);
    BOOST_TEST(a.granted_ttl == 5000ms);
    r.rows = {{std::string("f"), std::string("41"), std::string("1234"), std::string("f")}};
    BOOST_TEST(sql::decode_acquire(r, 5s, a, a_set));
    BOOST_TEST(!a.acquired);
    BOOST_TEST(a.holder_ttl == 1234ms);
    // A read-write lock's or a semaphore's marker row holds the name: another kind.
    r.rows = {{std::string("f"), std::string("3"), std::string("900"), std::string("t")}};
    BOOST_TEST(sql::decode_acquire(r, 5s, a, a_set));
    BOOST_TEST(a_set.value_or(0) == 3u);                            // the marker's fence: a semaphore of 3
    BOOST_TEST(!sql::decode_acquire(sql::result{}, 5s, a, a_set));  // the upsert always returns its row
    r.rows = {{std::string("t"), std::string("x"), std::string("1"), std::string("f")}};
    BOOST_TEST(!sql::decode_acquire(r, 5s, a, a_set));
    r.rows = {{std::string("t"), std::string("42"), std::string("5000")}};  // the shape before sets
    BOOST_TEST(!sql::decode_acquire(r, 5s, a, a_set));
    dlock::renew_result rr;
    r.rows = {{std::string("t")}};
    BOOST_TEST(sql::decode_renew(r, rr));
    BOOST_TEST(rr.owned);
    BOOST_TEST(rr.contended);
    BOOST_TEST(sql::decode_renew(sql::result{}, rr));
    BOOST_TEST(!rr.owned);
    sql::release_outcome rel;
    r.rows = {{std::string("f"), std::string("1"), std::string("f")}};
    BOOST_TEST(sql::decode_release(r, rel));
    BOOST_TEST(!rel.held);  // an expired lease of ours: deleted, but it was not held
    r.rows = {{std::string("t"), std::string("1"), std::string("f")}};
    BOOST_TEST(sql::decode_release(r, rel));
    BOOST_TEST(rel.held);
    r.rows = {{std::nullopt, std::string("0"), std::string("t")}};
    BOOST_TEST(sql::decode_release(r, rel));
    BOOST_TEST(!rel.held);
    BOOST_TEST(rel.raced);
    BOOST_TEST(!sql::decode_release(sql::result{}, rel));
    dlock::lock_status s;
    r.rows = {{std::string("tok"), std::string("7"), std::string("900"), std::string("t"), std::string("2"),
               std::string("9")}};
    BOOST_TEST(sql::decode_status(r, s));
    BOOST_TEST(s.last_fencing_token == 9u);
    BOOST_TEST(s.held);
    BOOST_TEST(s.holder == "tok");
    BOOST_TEST(s.fencing_token == 7u);
    BOOST_TEST(s.ttl == 900ms);
    BOOST_TEST(s.queued == 2u);
    r.rows = {{std::nullopt, std::nullopt, std::string("0"), std::nullopt, std::string("0"), std::string("12")}};
    BOOST_TEST(sql::decode_status(r, s));
    BOOST_TEST(!s.held);
    BOOST_TEST(s.last_fencing_token == 12u);  // released: the counter still says how far it went
    r.rows = {
        {std::string("tok"), std::nullopt, std::string("900"), std::string("t"), std::string("0"), std::string("0")}};
    BOOST_TEST(!sql::decode_status(r, s));
    // Hand-off notices: the token's length splits it from the name, whatever either holds.
    sql::grant g;
    BOOST_TEST(sql::decode_grant("17 4000 5 to ke na me", g));
    BOOST_TEST(g.notice.fencing_token == 17u);
    BOOST_TEST(g.notice.ttl == 4000ms);
    BOOST_TEST(g.token == "to ke");
    BOOST_TEST(g.name == " na me");
    for (const char* bad : {"", "17", "17 4000", "17 4000 5 short", "0 4000 1 ab", "17 0 1 ab", "x 4000 1 ab",
                            "17 4000 0 ab", "-1 4000 1 ab"})
        BOOST_TEST(!sql::decode_grant(bad, g), bad);
}

// An election's reads: the status columns and the value, which only a live holder has;
// a proclaim says whether it wrote.
BOOST_AUTO_TEST_CASE(leader_and_proclaim_replies)
{
    sql::result r;
    dlock::lock_status s;
    r.rows = {{std::string("tok"), std::string("7"), std::string("900"), std::string("t"), std::string("0"),
               std::string("9"), std::string("alpha")}};
    BOOST_TEST(sql::decode_leader(r, s));
    BOOST_TEST(s.held);
    BOOST_TEST(s.fencing_token == 7u);
    BOOST_TEST(s.value.value_or("") == "alpha");
    s = {};
    r.rows[0][6] = std::nullopt;  // a leader that has not proclaimed yet
    BOOST_TEST(sql::decode_leader(r, s));
    BOOST_TEST(s.held);
    BOOST_TEST(!s.value.has_value());
    s = {};
    r.rows = {{std::string("tok"), std::string("7"), std::string("0"), std::string("f"), std::string("0"),
               std::string("9"), std::string("stale")}};  // an expired row keeps its value until taken
    BOOST_TEST(sql::decode_leader(r, s));
    BOOST_TEST(!s.held);
    BOOST_TEST(!s.value.has_value());
    r.rows[0].pop_back();  // the status's shape is not the leader's
    BOOST_TEST(!sql::decode_leader(r, s));
    bool written = true;
    r.rows = {{std::string("f")}};
    BOOST_TEST(sql::decode_proclaim(r, written));
    BOOST_TEST(!written);
    r.rows = {{std::string("t")}};
    BOOST_TEST(sql::decode_proclaim(r, written));
    BOOST_TEST(written);
    r.rows = {};
    BOOST_TEST(!sql::decode_proclaim(r, written));
    // The statements bind the value and fence it by the owner and the server's clock.
    auto st = sql::make_statements("dlock_locks");
    BOOST_TEST(st.proclaim.find("t.owner = $2 AND t.expires_at > clock_timestamp()") != std::string::npos);
    BOOST_TEST(st.proclaim.find("SET value = $3, value_owner = $2") != std::string::npos);
    BOOST_TEST(st.leader.find("CASE WHEN t.value_owner = t.owner THEN t.value END FROM") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(errors_and_names)
{
    auto of = [](std::string state) {
        sql::result r;
        r.sqlstate = std::move(state);
        r.message = "x";
        return sql::error_of(r);
    };
    BOOST_TEST(of("28P01") == dlock::error::auth_failed);
    BOOST_TEST(of("42501") == dlock::error::permission_denied);
    BOOST_TEST(of("57P01") == dlock::error::connection_lost);
    BOOST_TEST(of("40001") == dlock::error::server_busy);
    BOOST_TEST(of("54000") == dlock::error::invalid_name);
    BOOST_TEST(of("42P01") == dlock::error::server_error);
    BOOST_TEST(!sql::error_of(sql::result{}));
    BOOST_TEST(sql::connect_error_of("FATAL:  password authentication failed for user \"x\"") ==
               dlock::error::auth_failed);
    BOOST_TEST(sql::connect_error_of("FATAL:  database \"nope\" does not exist") == dlock::error::handshake_failed);
    BOOST_TEST(sql::connect_error_of("connection to server at \"127.0.0.1\", port 1 failed: Connection refused") ==
               dlock::error::connect_failed);
    BOOST_TEST(sql::check_name("a'b\\c\"d") == boost::system::error_code());
    BOOST_TEST(sql::check_name("") == dlock::error::invalid_name);
    BOOST_TEST(sql::check_name(std::string("a\0b", 3)) == dlock::error::invalid_name);
    BOOST_TEST(sql::check_name(std::string(10'000, 'x')) == dlock::error::invalid_name);
}

BOOST_AUTO_TEST_SUITE_END()
