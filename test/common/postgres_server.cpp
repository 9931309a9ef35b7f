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
constexpr const char* super_password = "super-secret";

}  // namespace

postgres_server::postgres_server()
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

void postgres_server::start()
{
    auto command = [this](std::uint16_t port) {
        return std::vector<std::string>{bin + "postgres",
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
    return "postgresql://dlock:secret@127.0.0.1:" + std::to_string(port_) + "/dlock";
}

postgres::config postgres_server::config() const
{
    postgres::config c;
    c.host = "127.0.0.1";
    c.port = port_;
    c.user = "dlock";
    c.password = "secret";
    c.database = "dlock";
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
