// SPDX-License-Identifier: BSL-1.0
// A PostgreSQL or MariaDB store built from a config whose table name parse_url would refuse
// (a hand-made config) never puts that name into SQL, and never silently uses another table:
// every operation fails at once with invalid_option, the reason in last_error_text(), and
// nothing connects (the port below has no server: a connect would say connect_failed).
#include <dlock/error.hpp>
#ifdef DLOCK_HAS_POSTGRES
#include <dlock/postgres/store.hpp>
#endif
#ifdef DLOCK_HAS_MARIADB
#include <dlock/mariadb/store.hpp>
#endif

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <string>

namespace {

// A store of type `Store` on a port with no server, its config's table `table`: every
// operation is expected to fail with invalid_option naming the table.
template <class Store, class Config>
void every_operation_is_refused(const std::string& table)
{
    boost::asio::io_context io;
    Config cfg;
    cfg.port = 1;
    cfg.table = table;
    Store st(io.get_executor(), cfg);
    int done = 0;
    auto refused = [&](boost::system::error_code ec) {
        BOOST_TEST((ec == dlock::error::invalid_option), ec.message());
        BOOST_TEST(st.last_error_text().find("config.table") != std::string::npos, st.last_error_text());
        ++done;
    };
    dlock::lease_request req;
    req.name = "n";
    req.token = "t";
    req.ttl = std::chrono::milliseconds(5000);
    st.async_connect([&](boost::system::error_code ec) { refused(ec); });
    st.async_try_acquire(req, [&](boost::system::error_code ec, dlock::acquire_result r) {
        BOOST_TEST(!r.acquired);
        refused(ec);
    });
    st.async_renew(dlock::lease_key{"n", "t"}, req.ttl,
                   [&](boost::system::error_code ec, dlock::renew_result) { refused(ec); });
    st.async_release(dlock::lease_key{"n", "t"}, [&](boost::system::error_code ec, bool) { refused(ec); });
    st.async_force_release("n", [&](boost::system::error_code ec, bool) { refused(ec); });
    st.async_status("n", [&](boost::system::error_code ec, dlock::lock_status) { refused(ec); });
    io.run_for(std::chrono::seconds(10));
    BOOST_TEST(done == 6);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sql_bad_table)

#ifdef DLOCK_HAS_POSTGRES
BOOST_AUTO_TEST_CASE(postgres_refuses_a_table_name_it_would_not_parse)
{
    every_operation_is_refused<dlock::postgres_store, dlock::postgres::config>("locks; DROP TABLE x");
}
#endif

#ifdef DLOCK_HAS_MARIADB
BOOST_AUTO_TEST_CASE(mariadb_refuses_a_table_name_it_would_not_parse)
{
    every_operation_is_refused<dlock::mariadb_store, dlock::mariadb::config>("a.b.c");
}
#endif

BOOST_AUTO_TEST_SUITE_END()
