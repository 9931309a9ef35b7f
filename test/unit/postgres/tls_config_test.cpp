// SPDX-License-Identifier: BSL-1.0
// PostgreSQL's TLS settings without a server: sslmode, sslrootcert, sslcert and sslkey in the
// URL, verify-full when a CA is given, what to_url() shows, and what libpq's words for a
// failed connect become (which refusals are permanent, and the text kept).
#include <dlock/error.hpp>
#include <dlock/postgres/config.hpp>

#include "postgres/connection.hpp"

#include <boost/test/unit_test.hpp>

namespace pg = dlock::postgres;

BOOST_AUTO_TEST_SUITE(postgres_tls_config)

BOOST_AUTO_TEST_CASE(the_tls_options_as_libpq_spells_them)
{
    pg::config c;
    pg::config_error err;
    BOOST_TEST(pg::parse_url("postgresql://app:s3cret@db.example/locks?sslmode=verify-ca&sslrootcert=/etc/pg/ca.crt"
                             "&sslcert=/etc/pg/app.crt&sslkey=/etc/pg/app.key",
                             c, err),
               err.message);
    BOOST_TEST(c.sslmode == "verify-ca");
    BOOST_TEST(c.sslrootcert == "/etc/pg/ca.crt");
    BOOST_TEST(c.sslcert == "/etc/pg/app.crt");
    BOOST_TEST(c.sslkey == "/etc/pg/app.key");
    BOOST_TEST(pg::to_url(c) == "postgresql://app@db.example:5432/locks?sslmode=verify-ca&sslrootcert=/etc/pg/ca.crt"
                                "&sslcert=/etc/pg/app.crt&sslkey=/etc/pg/app.key");
    // A path is %-decoded, and to_url() writes it back so that it reads the same.
    pg::config d;
    BOOST_TEST(pg::parse_url("postgresql://u@h/db?sslrootcert=/certs%20%26%20keys/ca%25.crt", d, err), err.message);
    BOOST_TEST(d.sslrootcert == "/certs & keys/ca%.crt");
    pg::config again;
    BOOST_TEST(pg::parse_url(pg::to_url(d), again, err), err.message);
    BOOST_TEST(again.sslrootcert == d.sslrootcert);
    BOOST_TEST(again.sslmode == "verify-full");
    // No TLS option: nothing added (libpq's default).
    pg::config plain;
    BOOST_TEST(pg::parse_url("postgresql://u:pw@h/db", plain, err));
    BOOST_TEST(plain.sslmode.empty());
    BOOST_TEST(pg::to_url(plain) == "postgresql://u@h:5432/db");
}

BOOST_AUTO_TEST_CASE(a_ca_without_sslmode_means_verify_full)
{
    pg::config c;
    pg::config_error err;
    BOOST_TEST(pg::parse_url("postgresql://u@h/db?sslrootcert=/ca.crt", c, err), err.message);
    BOOST_TEST(c.sslmode == "verify-full");
    pg::config r;
    BOOST_TEST(pg::parse_url("postgresql://u@h/db?sslrootcert=/ca.crt&sslmode=require", r, err), err.message);
    BOOST_TEST(r.sslmode == "require");  // asked for: kept
    // A config built in code follows the same rule when it connects.
    pg::config by_hand;
    BOOST_TEST(pg::effective_sslmode(by_hand).empty());
    by_hand.sslrootcert = "/ca.crt";
    BOOST_TEST(pg::effective_sslmode(by_hand) == "verify-full");
    BOOST_TEST(pg::to_url(by_hand) == "postgresql://127.0.0.1:5432/postgres?sslmode=verify-full&sslrootcert=/ca.crt");
    by_hand.sslmode = "verify-ca";
    BOOST_TEST(pg::effective_sslmode(by_hand) == "verify-ca");
}

BOOST_AUTO_TEST_CASE(bad_tls_options_are_refused)
{
    pg::config c;
    pg::config_error err;
    BOOST_TEST(!pg::parse_url("postgresql://u:s3cret@h/db?sslmode=verify_full", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(err.message == "postgresql URL: bad sslmode 'verify_full' (disable, allow, prefer, require, "
                              "verify-ca, verify-full)");
    BOOST_TEST(!pg::parse_url("postgresql://u@h/db?sslcert=/c.crt", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(err.message.find("sslcert and sslkey go together") != std::string::npos, err.message);
    BOOST_TEST(!pg::parse_url("postgresql://u@h/db?sslkey=/c.key", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!pg::parse_url("postgresql://u@h/db?sslmode=disable&sslrootcert=/ca.crt", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(err.message.find("sslmode=disable") != std::string::npos, err.message);
    BOOST_TEST(!pg::parse_url("postgresql://u@h/db?sslrootcert=", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(!pg::parse_url("postgresql://u@h/db?sslkey=/k%2", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_url);
    BOOST_TEST(!pg::parse_url("postgresql://u@h/db?sslpassword=x", c, err));
    BOOST_TEST(err.code == dlock::error::invalid_option);
    BOOST_TEST(err.message.find("sslrootcert, sslcert, sslkey") != std::string::npos, err.message);
    // A refused URL leaves the config as it was.
    BOOST_TEST(c.sslmode.empty());
    BOOST_TEST(c.sslrootcert.empty());
}

BOOST_AUTO_TEST_CASE(the_password_is_never_shown)
{
    pg::config c;
    pg::config_error err;
    BOOST_TEST(pg::parse_url("postgresql://u:s3cret@h/db?sslrootcert=/ca.crt&sslcert=/u.crt&sslkey=/u.key", c, err));
    BOOST_TEST(pg::to_url(c).find("s3cret") == std::string::npos, pg::to_url(c));
    auto f = pg::detail::classify_connect_failure("SSL error: certificate verify failed\n", c);
    BOOST_TEST(f.text.find("s3cret") == std::string::npos, f.text);
}

// libpq's words for each refusal, as libpq 15 and PostgreSQL 15 write them.
BOOST_AUTO_TEST_CASE(refused_tls_is_permanent_and_says_what_was_refused)
{
    pg::config c;
    c.host = "db";
    c.user = "app";
    c.sslrootcert = "/ca.crt";
    const std::string at = "connection to server at \"10.0.0.1\", port 5432 failed: ";
    struct row {
        std::string libpq;
        dlock::error code;
        std::string what;
    };
    const row rows[] = {
        {at + "SSL error: certificate verify failed", dlock::error::tls_failed, "not signed by the CA in sslrootcert"},
        {at + "server certificate for \"localhost\" (and 1 other name) does not match host name \"db\"",
         dlock::error::tls_failed, "not issued for this host name"},
        {at + "SSL error: sslv3 alert certificate expired", dlock::error::tls_failed, "it has expired"},
        {at + "SSL error: tlsv1 alert unknown ca", dlock::error::tls_failed, "signed by a CA it does not trust"},
        {at + "FATAL:  connection requires a valid client certificate", dlock::error::tls_failed,
         "requires a client certificate"},
        {at + "SSL error: tlsv13 alert certificate required", dlock::error::tls_failed,
         "requires a client certificate"},
        {at + "root certificate file \"/ca.crt\" does not exist\nEither provide the file or change sslmode to "
              "disable server certificate verification.\n",
         dlock::error::tls_failed, "the CA file (sslrootcert)"},
        {at + "private key file \"/u.key\" has group or world access; file must have permissions u=rw (0600)",
         dlock::error::tls_failed, "the client key (sslkey)"},
        {at + "could not load private key file \"/u.key\": key values mismatch", dlock::error::tls_failed,
         "the client key (sslkey)"},
        {at + "could not read certificate file \"/u.crt\": no start line", dlock::error::tls_failed,
         "the client certificate (sslcert)"},
        {at + "server does not support SSL, but SSL was required", dlock::error::tls_failed, "does not offer TLS"},
        {at + "FATAL:  password authentication failed for user \"app\"", dlock::error::auth_failed,
         "password authentication failed"},
        {at + "FATAL:  certificate authentication failed for user \"app\"", dlock::error::auth_failed,
         "certificate authentication failed"},
        {at + "FATAL:  no pg_hba.conf entry for host \"10.0.0.9\", user \"app\", database \"postgres\", no encryption",
         dlock::error::permission_denied, "no encryption"},
        // A handshake cut short is the network's: tried again.
        {at + "SSL SYSCALL error: EOF detected", dlock::error::connect_failed, "EOF detected"},
        {at + "Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
         dlock::error::connect_failed, "Connection refused"},
    };
    for (const auto& r : rows) {
        auto f = pg::detail::classify_connect_failure(r.libpq, c);
        BOOST_TEST(f.code == r.code, r.libpq << ": " << f.code.message());
        BOOST_TEST(dlock::is_transient(f.code) == (r.code == dlock::error::connect_failed), r.libpq);
        BOOST_TEST(f.text.find(r.what) != std::string::npos, f.text);
        BOOST_TEST(f.text.rfind("postgresql postgresql://app@db:5432/postgres?sslmode=verify-full", 0) == 0, f.text);
        BOOST_TEST(f.text.find('\n') == std::string::npos, f.text);
    }
}

BOOST_AUTO_TEST_SUITE_END()
