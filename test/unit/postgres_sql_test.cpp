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

BOOST_AUTO_TEST_CASE(statements_bind_names_and_quote_the_table)
{
    auto st = sql::make_statements("app.leases");
    BOOST_TEST(sql::quote_table("app.leases") == "\"app\".\"leases\"");
    BOOST_TEST(sql::quote_sequence("leases") == "\"leases_fence\"");
    for (const auto* s : {&st.acquire, &st.contend, &st.renew, &st.release, &st.force_release, &st.status}) {
        BOOST_TEST(s->find("$1") != std::string::npos);
        BOOST_TEST(s->find("\"app\".\"leases\"") != std::string::npos);
    }
    BOOST_TEST(st.acquire.find("ON CONFLICT (name) DO UPDATE") != std::string::npos);
    BOOST_TEST(st.acquire.find("clock_timestamp()") != std::string::npos);
    BOOST_TEST(st.release.find("pg_notify('dlock'") != std::string::npos);
    BOOST_TEST(st.setup.find("CREATE SEQUENCE IF NOT EXISTS \"app\".\"leases_fence\"") != std::string::npos);
    BOOST_TEST(sql::listen() == "LISTEN dlock");
}

BOOST_AUTO_TEST_CASE(decoding)
{
    sql::result r;
    r.rows = {{std::string("42")}};
    dlock::acquire_result a;
    BOOST_TEST(sql::decode_acquire(r, 5s, a));
    BOOST_TEST(a.acquired);
    BOOST_TEST(a.fencing_token == 42u);
    BOOST_TEST(a.granted_ttl == 5000ms);
    BOOST_TEST(sql::decode_acquire(sql::result{}, 5s, a));
    BOOST_TEST(!a.acquired);
    r.rows = {{std::string("x")}};
    BOOST_TEST(!sql::decode_acquire(r, 5s, a));
    r.rows = {{std::string("1234")}};
    BOOST_TEST(sql::decode_contend(r, a));
    BOOST_TEST(a.holder_ttl == 1234ms);
    BOOST_TEST(sql::decode_contend(sql::result{}, a));
    BOOST_TEST(a.holder_ttl == 0ms);
    dlock::renew_result rr;
    r.rows = {{std::string("t")}};
    BOOST_TEST(sql::decode_renew(r, rr));
    BOOST_TEST(rr.owned);
    BOOST_TEST(rr.contended);
    BOOST_TEST(sql::decode_renew(sql::result{}, rr));
    BOOST_TEST(!rr.owned);
    bool released = true;
    r.rows = {{std::string("f"), std::string("")}};
    BOOST_TEST(sql::decode_release(r, released));
    BOOST_TEST(!released);  // an expired lease of ours: deleted, but it was not held
    dlock::lock_status s;
    r.rows = {{std::string("tok"), std::string("7"), std::string("900"), std::string("t")}};
    BOOST_TEST(sql::decode_status(r, s));
    BOOST_TEST(s.held);
    BOOST_TEST(s.holder == "tok");
    BOOST_TEST(s.fencing_token == 7u);
    BOOST_TEST(s.ttl == 900ms);
    r.rows = {{std::nullopt, std::string("7"), std::string("900"), std::string("t")}};
    BOOST_TEST(!sql::decode_status(r, s));
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
    BOOST_TEST(sql::valid_ttl(1ms));
    BOOST_TEST(!sql::valid_ttl(0ms));
}

BOOST_AUTO_TEST_SUITE_END()
