// SPDX-License-Identifier: BSL-1.0
#include "common/postgres_server.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace dlock::test {

namespace {

const std::string bin = "/usr/lib/postgresql/15/bin/";
const std::string openssl = "/usr/bin/openssl";
constexpr const char* super_password = "super-secret";

// openssl's settings for the certificates: each kind's extensions, and the database that
// `openssl ca` needs (the only way to give a certificate past dates on OpenSSL 3.0:
// `x509 -days` takes no negative number).
std::string openssl_config(const std::string& tls)
{
    return "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n"
           "[ca_ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
           "subjectKeyIdentifier = hash\n"
           "[server_ext]\nbasicConstraints = CA:FALSE\nsubjectAltName = DNS:localhost,IP:127.0.0.1\n"
           "extendedKeyUsage = serverAuth\n"
           "[other_host_ext]\nbasicConstraints = CA:FALSE\nsubjectAltName = DNS:db.invalid\n"
           "extendedKeyUsage = serverAuth\n"
           "[client_ext]\nbasicConstraints = CA:FALSE\nextendedKeyUsage = clientAuth\n"
           "[ca]\ndefault_ca = test_ca\n"
           "[test_ca]\ndatabase = " +
           tls + "/index.txt\nnew_certs_dir = " + tls + "\nserial = " + tls +
           "/serial\ndefault_md = sha256\npolicy = any\nunique_subject = no\n"
           "[any]\ncommonName = supplied\n";
}

void write_file(const std::string& path, const std::string& text)
{
    std::ofstream f(path, std::ios::trunc);
    f << text;
    if (!f.flush())
        throw std::runtime_error("cannot write " + path);
}

// The openssl CLI making keys (EC P-256, mode 0600: libpq refuses others) and certificates
// in one directory: `name`.key, `name`.crt.
class certificate_maker {
public:
    explicit certificate_maker(std::string dir) : dir_(std::move(dir)), cnf_(dir_ + "/openssl.cnf")
    {
        std::filesystem::create_directory(dir_);
        write_file(cnf_, openssl_config(dir_));
        write_file(dir_ + "/index.txt", "");
        write_file(dir_ + "/serial", "1000\n");
    }

    std::string path(const std::string& name, const char* ext) const { return dir_ + "/" + name + ext; }

    /// A CA: its key and self-signed certificate.
    void ca(const std::string& name, const std::string& subject) const
    {
        key_and(name, subject, {"-x509", "-days", "3", "-extensions", "ca_ext", "-out", path(name, ".crt")});
    }

    /// A key and a certificate signed by CA `ca`, valid from now for 3 days, with `ext`'s extensions.
    void signed_by(const std::string& ca, const std::string& name, const std::string& subject, const std::string& ext)
    {
        key_and(name, subject, {"-out", path(name, ".csr")});
        run({"x509", "-req", "-in", path(name, ".csr"), "-CA", path(ca, ".crt"), "-CAkey", path(ca, ".key"),
             "-set_serial", std::to_string(serial_++), "-days", "3", "-extfile", cnf_, "-extensions", ext, "-out",
             path(name, ".crt")});
    }

    /// A client certificate by `ca` valid on 1 January 2020 only.
    void expired_by(const std::string& ca, const std::string& name, const std::string& subject) const
    {
        key_and(name, subject, {"-out", path(name, ".csr")});
        run({"ca", "-batch", "-notext", "-config", cnf_, "-cert", path(ca, ".crt"), "-keyfile", path(ca, ".key"),
             "-extensions", "client_ext", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-in",
             path(name, ".csr"), "-out", path(name, ".crt")});
    }

private:
    void run(std::vector<std::string> args) const
    {
        args.insert(args.begin(), openssl);
        run_tool(args, {dir_ + "/openssl.log"});
    }

    // A new key `name`.key, and what `req` makes with it besides (`more`).
    void key_and(const std::string& name, const std::string& subject, std::vector<std::string> more) const
    {
        std::vector<std::string> args{"req",    "-newkey", "ec",   "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                      "-nodes", "-subj",   subject};
        args.insert(args.end(), {"-config", cnf_, "-keyout", path(name, ".key")});
        args.insert(args.end(), more.begin(), more.end());
        run(std::move(args));
        if (::chmod(path(name, ".key").c_str(), 0600) != 0)
            throw std::runtime_error("chmod " + path(name, ".key") + " failed");
    }

    std::string dir_, cnf_;
    int serial_ = 1;
};

}  // namespace

postgres_server::postgres_server(postgres_tls tls) : tls_(tls)
{
    char tmpl[] = "/tmp/dlock-pg-XXXXXX";
    if (!::mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    user_ = unprivileged_user("dlock-pg");  // PostgreSQL refuses to run as root.
    {
        std::ofstream pw(dir_ + "/pwfile");
        pw << super_password << "\n";
    }
    if (user_) {
        for (const auto& p : {dir_, dir_ + "/pwfile"})
            if (::chown(p.c_str(), user_->uid, user_->gid) != 0)
                throw std::runtime_error("chown " + p + " failed");
    }
    ::chmod(dir_.c_str(), 0700);
    run_tool({bin + "initdb", "-D", dir_ + "/data", "-U", "postgres", "--auth=scram-sha-256",
              "--pwfile=" + dir_ + "/pwfile", "-E", "UTF8", "--no-sync", "--no-instructions"},
             {dir_ + "/initdb.log", user_});
    if (tls_ == postgres_tls::mutual) {
        make_certificates();
        require_tls();
    }
    start();
    psql("CREATE ROLE dlock LOGIN PASSWORD 'secret'");
    psql("CREATE DATABASE dlock OWNER dlock");
}

postgres_server::~postgres_server()
{
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void postgres_server::make_certificates()
{
    certificate_maker m(dir_ + "/tls");
    m.ca("ca", "/CN=dlock test CA");
    m.ca("other_ca", "/CN=dlock other CA");
    m.signed_by("ca", "server", "/CN=localhost", "server_ext");
    m.signed_by("ca", "other_host", "/CN=db.invalid", "other_host_ext");
    m.signed_by("ca", "client", "/CN=dlock", "client_ext");
    m.signed_by("other_ca", "foreign", "/CN=dlock", "client_ext");
    m.expired_by("ca", "expired", "/CN=dlock");
    auto crt = [&](const char* n) { return m.path(n, ".crt"); };
    auto key = [&](const char* n) { return m.path(n, ".key"); };
    files_ = {crt("ca"),     crt("other_ca"), crt("server"),  key("server"),  crt("other_host"), key("other_host"),
              crt("client"), key("client"),   crt("expired"), key("expired"), crt("foreign"),    key("foreign")};
    if (user_)  // the server refuses a key that is not its user's
        for (const auto& k : {files_.server_key, files_.other_host_key})
            if (::chown(k.c_str(), user_->uid, user_->gid) != 0)
                throw std::runtime_error("chown " + k + " failed");
    served_cert_ = files_.server_cert;
    served_key_ = files_.server_key;
}

void postgres_server::require_tls()
{
    write_file(dir_ + "/data/pg_hba.conf",
               "# dlock tests: TLS only; roles but the superuser also show a client certificate for their name.\n"
               "hostssl all postgres 127.0.0.1/32 scram-sha-256\n"
               "hostssl all all      127.0.0.1/32 scram-sha-256 clientcert=verify-full\n");
}

void postgres_server::serve_certificate(const std::string& cert, const std::string& key)
{
    stop();
    served_cert_ = cert;
    served_key_ = key;
    start();
}

void postgres_server::start()
{
    auto command = [this](std::uint16_t port) {
        auto argv = std::vector<std::string>{bin + "postgres",
                                             "-D",
                                             dir_ + "/data",
                                             "-p",
                                             std::to_string(port),
                                             "-k",
                                             dir_,
                                             "-c",
                                             "listen_addresses=127.0.0.1",
                                             "-c",
                                             "fsync=off",
                                             "-c",
                                             "max_connections=60"};
        if (tls_ == postgres_tls::mutual)
            argv.insert(argv.end(), {"-c", "ssl=on", "-c", "ssl_cert_file=" + served_cert_, "-c",
                                     "ssl_key_file=" + served_key_, "-c", "ssl_ca_file=" + files_.ca});
        return argv;
    };
    proc_.start(port_, command, {dir_ + "/postgres.log", user_}, dir_ + "/postgres.log",
                "database system is ready to accept connections", "postgres");
}

void postgres_server::stop(bool immediate)
{
    // SIGINT: fast shutdown (does not wait for clients); SIGQUIT: immediate, like a crash
    // (no checkpoint; the next start replays the WAL).
    proc_.stop(immediate ? SIGQUIT : SIGINT);
}

std::string postgres_server::url() const
{
    std::string u = "postgresql://dlock:secret@127.0.0.1:" + std::to_string(port_) + "/dlock";
    if (tls_ == postgres_tls::mutual)
        u += "?sslrootcert=" + files_.ca + "&sslcert=" + files_.client_cert + "&sslkey=" + files_.client_key;
    return u;
}

postgres::config postgres_server::config() const
{
    postgres::config c;
    c.host = "127.0.0.1";
    c.port = port_;
    c.user = "dlock";
    c.password = "secret";
    c.database = "dlock";
    if (tls_ == postgres_tls::mutual) {
        c.sslrootcert = files_.ca;
        c.sslcert = files_.client_cert;
        c.sslkey = files_.client_key;
    }
    return c;
}

std::string postgres_server::psql(const std::string& sql) const
{
    spawn_options o;
    o.env = {std::string("PGPASSWORD=") + super_password, "PGCONNECT_TIMEOUT=10"};
    // Before CREATE DATABASE dlock: connect to `postgres`.
    bool early = sql.rfind("CREATE ROLE", 0) == 0 || sql.rfind("CREATE DATABASE", 0) == 0;
    return run_client({bin + "psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                       std::to_string(port_), "-U", "postgres", "-d", early ? "postgres" : "dlock", "-c", sql},
                      o, "psql failed: " + sql);
}

}  // namespace dlock::test
