// SPDX-License-Identifier: BSL-1.0
// postgres_store over TLS on a throwaway PostgreSQL that takes TLS only, with certificates made
// by the test (common/postgres_server.hpp, postgres_tls::mutual): locks, a hand-off and the
// watchdog with verify-full and a client certificate; and every refusal (another CA, another
// host's certificate, an expired or foreign client certificate, none, no TLS, a wrong
// password) permanent, fast, named, and without the password or a key in its text.
#include <dlock/error.hpp>
#include <dlock/postgres.hpp>
#include <dlock/registry.hpp>

#include "common/postgres_server.hpp"
#include "integration/sql/support.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
using steady = std::chrono::steady_clock;

postgres_server& tls_server()
{
    static postgres_server srv(postgres_tls::mutual);
    return srv;
}

long count(const std::string& sql)
{
    return std::stol("0" + tls_server().psql(sql));
}

std::string slurp(const std::string& path)
{
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// Neither the password nor a line of a private key is in `text`.
void no_secrets(const std::string& text)
{
    BOOST_TEST(text.find("secret") == std::string::npos, text);
    BOOST_TEST(text.find("PRIVATE KEY") == std::string::npos, text);
    const auto& f = tls_server().tls();
    for (const auto& key : {f.client_key, f.expired_key, f.foreign_key}) {
        std::istringstream lines(slurp(key));
        for (std::string line; std::getline(lines, line);)
            if (line.size() > 16 && line.rfind("-----", 0) != 0)
                BOOST_TEST(text.find(line) == std::string::npos, "a line of " << key << " in: " << text);
    }
}

// A store on `cfg` asked to connect, then for a lock it would wait for: what both said.
struct refusal {
    boost::system::error_code connect, acquire;
    std::string text;  // last_error_text() after the connect
    std::string describe;
    steady::duration took{};
};

refusal refused(dlock::postgres::config cfg)
{
    cfg.connect_timeout = 3s;
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), cfg);
    refusal r;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const auto start = steady::now();
            std::tie(r.connect) = co_await st.async_connect(use_tuple);
            r.text = st.last_error_text();
            r.describe = st.describe();
            // A waiting acquire retries what is transient: only a permanent error ends it.
            dlock::registry reg(st, {.lease = 2s});
            auto [ec, g] = co_await reg.obtain("refused").acquire(use_tuple);
            r.acquire = ec;
            r.took = steady::now() - start;
            if (!ec)
                co_await g.release();
            st.close();
        },
        30s);
    return r;
}

// `r` is `code`, permanent, had within 10 s (a retry loop would not end), names the store and
// `what` was refused, and shows no secret.
void check_refused(const refusal& r, dlock::error code, const std::string& what)
{
    BOOST_TEST(r.connect == code, r.connect.message() << ": " << r.text);
    BOOST_TEST(!dlock::is_transient(r.connect));
    BOOST_TEST(r.acquire == code, r.acquire.message());
    BOOST_TEST(r.took < 10s, std::chrono::duration_cast<std::chrono::milliseconds>(r.took).count() << " ms");
    BOOST_TEST(r.text.rfind("postgresql postgresql://dlock@127.0.0.1:", 0) == 0, r.text);
    BOOST_TEST(r.text.find(what) != std::string::npos, r.text);
    BOOST_TEST_MESSAGE(r.text);
    no_secrets(r.text);
    no_secrets(r.describe);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(postgres_tls)

// Two stores (two processes) with sslrootcert, sslcert and sslkey and no sslmode (so
// verify-full): a lock held past its lease by the watchdog, handed to the other's queued
// waiter; every backend of theirs is on TLS with the client certificate.
BOOST_AUTO_TEST_CASE(lock_hand_off_and_watchdog_over_mutual_tls)
{
    auto& srv = tls_server();
    auto cfg = srv.config();
    BOOST_TEST(dlock::postgres::effective_sslmode(cfg) == "verify-full");
    asio::io_context io;
    dlock::postgres_store a(io.get_executor(), cfg);
    dlock::postgres_store b(io.get_executor(), cfg);
    dlock::registry ra(a, {.lease = 1500ms});
    dlock::registry rb(b, {.lease = 1500ms});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await ra.obtain("tls").acquire();
            const auto first = g.fencing_token();
            // Four renewals: the lease outlived by more than its length.
            BOOST_TEST(co_await eventually([&] { return ra.stats().renewals >= 4; }));
            BOOST_TEST(ra.stats().lost == 0u);
            BOOST_TEST(g.owns_lock());
            std::uint64_t second = 0;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("tls").acquire();
                    second = g2.fencing_token();
                    co_await g2.release();
                },
                asio::detached);
            BOOST_REQUIRE(co_await eventually(
                [&] { return count("SELECT count(*) FROM dlock_locks_queue WHERE name = 'dlock:tls'") == 1; }));
            // a's connection, b's and b's listener: all TLS, all with the client certificate.
            const std::string ours = "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)"
                                     " WHERE a.application_name = 'dlock' AND ";
            BOOST_TEST(count(ours + "s.ssl AND s.client_dn = '/CN=dlock'") >= 3);
            BOOST_TEST(count(ours + "NOT (s.ssl AND s.client_dn = '/CN=dlock')") == 0);
            co_await g.release();
            BOOST_TEST(co_await eventually([&] { return second != 0; }));
            BOOST_TEST(second > first);
            BOOST_TEST(rb.stats().store_handoffs == 1u);  // handed over by the release, in the queue
            BOOST_TEST(a.describe().find("?sslmode=verify-full&sslrootcert=" + srv.tls().ca) != std::string::npos,
                       a.describe());
            no_secrets(a.describe());
            a.close();
            b.close();
        },
        30s);
}

// sslrootcert of another CA: the server's certificate does not verify.
BOOST_AUTO_TEST_CASE(a_server_certificate_from_another_ca_is_refused_at_once)
{
    auto cfg = tls_server().config();
    cfg.sslrootcert = tls_server().tls().other_ca;
    check_refused(refused(cfg), dlock::error::tls_failed, "not signed by the CA in sslrootcert");
    cfg.sslrootcert = tls_server().tls().ca + ".missing";
    check_refused(refused(cfg), dlock::error::tls_failed, "the CA file (sslrootcert) cannot be used");
}

// The server presents a certificate of our CA for db.invalid: verify-full refuses it,
// verify-ca (the CA only) takes it.
BOOST_AUTO_TEST_CASE(a_server_certificate_for_another_host_is_refused_at_once)
{
    auto& srv = tls_server();
    srv.serve_certificate(srv.tls().other_host_cert, srv.tls().other_host_key);
    struct put_back {
        postgres_server& srv;
        ~put_back() { srv.serve_certificate(srv.tls().server_cert, srv.tls().server_key); }
    } restore{srv};
    check_refused(refused(srv.config()), dlock::error::tls_failed, "not issued for this host name");
    auto ca_only = srv.config();
    ca_only.sslmode = "verify-ca";
    auto r = refused(ca_only);  // connects; the acquire gets the free name
    BOOST_TEST(!r.connect, r.connect.message() << ": " << r.text);
    BOOST_TEST(!r.acquire, r.acquire.message());
}

// Our certificate expired, signed by a CA the server does not trust, missing, or its key
// readable by others: each refused at once, saying which.
BOOST_AUTO_TEST_CASE(a_bad_client_certificate_is_refused_at_once)
{
    const auto& f = tls_server().tls();
    auto cfg = tls_server().config();
    cfg.sslcert = f.expired_cert;
    cfg.sslkey = f.expired_key;
    check_refused(refused(cfg), dlock::error::tls_failed, "client certificate (sslcert): it has expired");
    cfg.sslcert = f.foreign_cert;
    cfg.sslkey = f.foreign_key;
    check_refused(refused(cfg), dlock::error::tls_failed, "signed by a CA it does not trust");
    cfg.sslcert.clear();
    cfg.sslkey.clear();
    check_refused(refused(cfg), dlock::error::tls_failed, "the server requires a client certificate");
    const std::string loose = f.client_key + ".loose";
    std::filesystem::copy_file(f.client_key, loose, std::filesystem::copy_options::overwrite_existing);
    ::chmod(loose.c_str(), 0644);
    cfg.sslcert = f.client_cert;
    cfg.sslkey = loose;
    check_refused(refused(cfg), dlock::error::tls_failed, "the client key (sslkey) cannot be used");
    std::filesystem::remove(loose);
}

// Without TLS pg_hba.conf has no line for the role: permission_denied, permanent.
BOOST_AUTO_TEST_CASE(a_connection_without_tls_is_refused_at_once)
{
    auto cfg = tls_server().config();
    cfg.sslmode = "disable";
    cfg.sslrootcert.clear();
    cfg.sslcert.clear();
    cfg.sslkey.clear();
    check_refused(refused(cfg), dlock::error::permission_denied, "no encryption");
}

// The right certificate, the wrong password: auth_failed, the password not echoed.
BOOST_AUTO_TEST_CASE(a_wrong_password_over_tls_is_refused_at_once)
{
    auto cfg = tls_server().config();
    cfg.password = "not-the-pw";
    auto r = refused(cfg);
    check_refused(r, dlock::error::auth_failed, "password authentication failed");
    BOOST_TEST(r.text.find("not-the-pw") == std::string::npos, r.text);
}

#ifdef DLOCK_CLI_PATH
// The dlock tool takes the same URL, on its command line and in --config; a wrong CA is
// refused with the store's words and no password.
BOOST_AUTO_TEST_CASE(the_tool_takes_the_same_url)
{
    auto& srv = tls_server();
    auto r = dlock_tool({"run", "--url", srv.url(), "--lease", "5s", "tool-tls", "--", "/bin/sh", "-c", "exit 7"});
    BOOST_TEST(r.status == 7, r.out);
    const std::string conf = srv.tls().ca + ".dlock.json";
    std::ofstream(conf) << "{\"url\": \"" << srv.url() << "\"}";
    auto s = dlock_tool({"status", "--config", conf, "--json", "tool-tls"});
    BOOST_TEST(s.status == 0, s.out);
    BOOST_TEST(s.out.find("\"held\":false") != std::string::npos, s.out);
    // The password out of the URL (and of `ps`): libpq reads PGPASSWORD (or ~/.pgpass).
    std::string no_password = srv.url();
    no_password.erase(no_password.find(":secret@"), 7);
    ::setenv("PGPASSWORD", "secret", 1);
    auto from_env = dlock_tool({"status", "--url", no_password, "tool-tls"});
    ::unsetenv("PGPASSWORD");
    BOOST_TEST(from_env.status == 0, from_env.out);
    std::string wrong_ca = srv.url();
    wrong_ca.replace(wrong_ca.find(srv.tls().ca), srv.tls().ca.size(), srv.tls().other_ca);
    auto bad = dlock_tool({"status", "--url", wrong_ca, "tool-tls"});
    BOOST_TEST(bad.status == 69, bad.out);
    BOOST_TEST(bad.out.find("TLS refused: the server's certificate did not verify") != std::string::npos, bad.out);
    no_secrets(bad.out);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
