// SPDX-License-Identifier: BSL-1.0
// Connection setup against real servers: AUTH, ACL users, SELECT, TLS, unix sockets and
// the ways connecting can fail.
#include <dlock/error.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/connection.hpp>

#include "common/redis_server.hpp"
#include "integration/support.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <chrono>
#include <string>

namespace asio = boost::asio;
using namespace dlock;
using namespace std::chrono_literals;
using boost::system::error_code;
using test::cmd;
using test::exec;

namespace {

// Connects once with `cfg` and returns the result of that first attempt.
error_code connect_once(const redis::config& cfg, std::string* server_message = nullptr)
{
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    error_code result;
    test::run_test(io, [&]() -> asio::awaitable<void> {
        result = co_await test::connect(conn);
        if (server_message)
            *server_message = conn.last_server_message();
    });
    return result;
}

// Connects and runs one command; fails the test on any error.
redis::reply roundtrip(const redis::config& cfg, const redis::request& req)
{
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    redis::reply out;
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        auto r = co_await exec(conn, req);
        BOOST_TEST_REQUIRE(!r.ec, r.ec.message());
        out = r.resp.at(0);
    });
    return out;
}

// A CA that did not sign the test server's certificate.
std::string make_other_ca(const std::string& dir)
{
    int status = 0;
    test::run_capture({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                       "-days", "2", "-subj", "/CN=some-other-ca", "-keyout", dir + "/other-ca.key", "-out",
                       dir + "/other-ca.crt"},
                      &status);
    BOOST_TEST_REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "openssl failed");
    return dir + "/other-ca.crt";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(connection_setup_suite)

BOOST_AUTO_TEST_CASE(password)
{
    test::server_options opts;
    opts.password = "s3cret";
    test::redis_server srv(opts);

    BOOST_TEST(roundtrip(srv.config(), cmd("PING")).str == "PONG");

    auto cfg = srv.config();
    cfg.password = "wrong";
    std::string message;
    BOOST_TEST(connect_once(cfg, &message) == error::auth_failed);
    BOOST_TEST(message.rfind("WRONGPASS", 0) == 0u, message);
}

BOOST_AUTO_TEST_CASE(password_missing)
{
    test::server_options opts;
    opts.password = "s3cret";
    test::redis_server srv(opts);
    auto cfg = srv.config();
    cfg.password.clear();
    // No AUTH is sent, so CLIENT SETNAME meets NOAUTH: still an authentication problem.
    std::string message;
    BOOST_TEST(connect_once(cfg, &message) == error::auth_failed);
    BOOST_TEST(message.rfind("NOAUTH", 0) == 0u, message);
}

BOOST_AUTO_TEST_CASE(acl_user)
{
    test::server_options opts;
    opts.acl_user = "alice";
    opts.acl_password = "alice-pw";
    test::redis_server srv(opts);

    auto cfg = srv.config();
    cfg.username = "alice";
    cfg.password = "alice-pw";
    BOOST_TEST(roundtrip(cfg, cmd("ACL", "WHOAMI")).str == "alice");

    auto wrong_user = cfg;
    wrong_user.username = "mallory";
    std::string message;
    BOOST_TEST(connect_once(wrong_user, &message) == error::auth_failed);
    BOOST_TEST(message.rfind("WRONGPASS", 0) == 0u, message);

    auto wrong_password = cfg;
    wrong_password.password = "not-alice-pw";
    BOOST_TEST(connect_once(wrong_password) == error::auth_failed);
}

BOOST_AUTO_TEST_CASE(select_database)
{
    test::redis_server srv;
    auto cfg = srv.config();
    cfg.database = 3;
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    test::run_test(io, [&]() -> asio::awaitable<void> {
        auto r = co_await exec(conn, cmd("SET", "db-key", "in-three"));
        BOOST_TEST_REQUIRE(!r.ec);
    });
    BOOST_TEST(srv.cli({"-n", "3", "GET", "db-key"}) == "in-three");
    BOOST_TEST(srv.cli({"-n", "0", "EXISTS", "db-key"}) == "0");

    cfg.database = 1000;  // the server has 16
    std::string message;
    BOOST_TEST(connect_once(cfg, &message) == error::handshake_failed);
    BOOST_TEST(message.find("out of range") != std::string::npos, message);
}

BOOST_AUTO_TEST_CASE(config_from_url)
{
    test::server_options opts;
    opts.password = "pw";
    test::redis_server srv(opts);
    redis::config cfg;
    redis::config_error err;
    std::string url =
        "redis://:pw@127.0.0.1:" + std::to_string(srv.port()) + "/2?client_name=from-url&request_timeout=2s";
    BOOST_TEST_REQUIRE(redis::parse_url(url, cfg, err), err.message);
    BOOST_TEST(roundtrip(cfg, cmd("CLIENT", "GETNAME")).str == "from-url");
}

BOOST_AUTO_TEST_CASE(tls_with_right_ca)
{
    test::server_options opts;
    opts.tls = true;
    test::redis_server srv(opts);
    auto cfg = srv.config();
    BOOST_TEST_REQUIRE((cfg.kind == redis::transport::tls));
    BOOST_TEST(cfg.tls_ca_file == srv.ca_file());

    redis::request req;
    req.push("SET", "over-tls", std::string(100000, 't')).push("STRLEN", "over-tls");
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    test::run_test(io, [&]() -> asio::awaitable<void> {
        auto r = co_await exec(conn, req);
        BOOST_TEST_REQUIRE(!r.ec, r.ec.message());
        BOOST_TEST(r.resp.at(1).integer == 100000);
    });

    // The certificate names localhost too.
    cfg.host = "localhost";
    BOOST_TEST(roundtrip(cfg, cmd("PING")).str == "PONG");
}

BOOST_AUTO_TEST_CASE(tls_with_wrong_ca)
{
    test::server_options opts;
    opts.tls = true;
    test::redis_server srv(opts);
    auto cfg = srv.config();
    cfg.tls_ca_file = make_other_ca(srv.dir());
    BOOST_TEST(connect_once(cfg) == error::tls_failed);

    // The system's trust store does not know the throwaway CA either.
    cfg.tls_ca_file.clear();
    BOOST_TEST(connect_once(cfg) == error::tls_failed);

    // A CA file that does not exist.
    cfg.tls_ca_file = srv.dir() + "/missing.crt";
    BOOST_TEST(connect_once(cfg) == error::tls_failed);

    // Verification off: the same wrong CA is accepted.
    cfg.tls_ca_file = srv.dir() + "/other-ca.crt";
    cfg.tls_verify = false;
    BOOST_TEST(roundtrip(cfg, cmd("PING")).str == "PONG");
}

BOOST_AUTO_TEST_CASE(tls_host_name_mismatch)
{
    test::server_options opts;
    opts.tls = true;
    test::redis_server srv(opts);
    auto cfg = srv.config();
    // The same server through an IPv4-mapped IPv6 address, which the certificate does not name.
    cfg.host = "::ffff:127.0.0.1";
    BOOST_TEST(connect_once(cfg) == error::tls_failed);
}

BOOST_AUTO_TEST_CASE(tls_client_plain_server)
{
    test::redis_server srv;
    auto cfg = srv.config();
    cfg.kind = redis::transport::tls;
    // A plain server reads the ClientHello as the start of an inline command and waits for
    // the rest of the line: nothing ever answers, so the attempt ends at its deadline.
    cfg.connect_timeout = 300ms;
    BOOST_TEST(connect_once(cfg) == error::timeout);
}

BOOST_AUTO_TEST_CASE(plain_client_tls_server)
{
    test::server_options opts;
    opts.tls = true;
    test::redis_server srv(opts);
    auto cfg = srv.config();
    cfg.kind = redis::transport::tcp;
    cfg.connect_timeout = 2s;
    // The TLS server rejects the plain-text handshake and closes the connection.
    BOOST_TEST(connect_once(cfg) == error::connect_failed);
}

BOOST_AUTO_TEST_CASE(unix_socket)
{
    test::server_options opts;
    opts.unix_socket = true;
    test::redis_server srv(opts);
    redis::config cfg;
    cfg.kind = redis::transport::unix_socket;
    cfg.path = srv.unix_path();
    redis::request req;
    req.push("SET", "via-unix", "yes").push("GET", "via-unix");
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    test::run_test(io, [&]() -> asio::awaitable<void> {
        auto r = co_await exec(conn, req);
        BOOST_TEST_REQUIRE(!r.ec, r.ec.message());
        BOOST_TEST(r.resp.at(1).str == "yes");
    });
    BOOST_TEST(srv.cli({"GET", "via-unix"}) == "yes");

    cfg.path = srv.dir() + "/no-such.sock";
    BOOST_TEST(connect_once(cfg) == error::connect_failed);
}

BOOST_AUTO_TEST_CASE(unreachable_port)
{
    redis::config cfg;
    cfg.port = test::free_port();  // nothing listens there
    auto t0 = std::chrono::steady_clock::now();
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST(co_await test::connect(conn) == error::connect_failed);
        BOOST_TEST((std::chrono::steady_clock::now() - t0 < 1s));
        BOOST_TEST(!conn.is_connected());
        BOOST_TEST(conn.stats().connect_failures >= 1u);
        // Requests wait for a connection that never comes, up to their timeout.
        auto r = co_await exec(conn, cmd("PING"), 100ms);
        BOOST_TEST(r.ec == error::timeout);
    });
}

BOOST_AUTO_TEST_CASE(connect_timeout_on_unresponsive_server)
{
    test::redis_server srv;
    srv.pause();  // the kernel still accepts the TCP connection; nothing answers the handshake
    auto cfg = srv.config();
    cfg.connect_timeout = 200ms;
    auto t0 = std::chrono::steady_clock::now();
    BOOST_TEST(connect_once(cfg) == error::timeout);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 2s));
    srv.resume();
}

BOOST_AUTO_TEST_CASE(cancel_async_connect)
{
    test::redis_server srv;
    srv.pause();
    auto cfg = srv.config();
    cfg.connect_timeout = 10s;
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        asio::cancellation_signal sig;
        bool done = false;
        error_code result;
        conn.async_connect(asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) {
            done = true;
            result = ec;
            n.notify();
        }));
        sig.emit(asio::cancellation_type::terminal);
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return done; }, 1000ms));
        BOOST_TEST(result == asio::error::operation_aborted);
    });
    srv.resume();
}

BOOST_AUTO_TEST_SUITE_END()
