// SPDX-License-Identifier: BSL-1.0
#include "common/mariadb_server.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace dlock::test {

mariadb_server::mariadb_server()
{
    char tmpl[] = "/tmp/dlock-maria-XXXXXX";
    if (!::mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    // root (the test machine's user) is allowed with --user=root; root@localhost gets no
    // password and logs in on the unix socket only.
    std::vector<std::string> install{"/usr/bin/mariadb-install-db",
                                     "--no-defaults",
                                     "--datadir=" + dir_ + "/data",
                                     "--auth-root-authentication-method=normal",
                                     "--skip-test-db",
                                     "--skip-name-resolve"};
    if (::geteuid() == 0)
        install.push_back("--user=root");
    run_tool(install, {dir_ + "/install.log"});
    start();
    sql("CREATE DATABASE dlock;"
        "CREATE USER 'dlock'@'%' IDENTIFIED BY 'secret'; GRANT ALL ON dlock.* TO 'dlock'@'%';"
        "CREATE USER 'nocreate'@'%' IDENTIFIED BY 'secret';"
        "GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.* TO 'nocreate'@'%';"
        "CREATE USER 'nopriv'@'%' IDENTIFIED BY 'secret';");
}

mariadb_server::~mariadb_server()
{
    stop(true);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void mariadb_server::start()
{
    const std::string log = dir_ + "/error.log";
    auto command = [&](std::uint16_t port) {
        std::vector<std::string> argv{"/usr/sbin/mariadbd",
                                      "--no-defaults",
                                      "--datadir=" + dir_ + "/data",
                                      "--socket=" + dir_ + "/s",
                                      "--pid-file=" + dir_ + "/pid",
                                      "--log-error=" + log,
                                      "--port=" + std::to_string(port),
                                      "--bind-address=127.0.0.1",
                                      "--skip-name-resolve",
                                      "--innodb-flush-log-at-trx-commit=2",
                                      "--innodb-buffer-pool-size=32M",
                                      "--max-connections=300"};
        if (::geteuid() == 0)
            argv.push_back("--user=root");
        return argv;
    };
    proc_.start(port_, command, {dir_ + "/stdout.log"}, log, "ready for connections", "mariadbd");
}

void mariadb_server::stop(bool kill)
{
    proc_.stop(kill ? SIGKILL : SIGTERM);
}

std::string mariadb_server::url(const std::string& user) const
{
    return "mariadb://" + user + ":secret@127.0.0.1:" + std::to_string(port_) + "/dlock";
}

mariadb::config mariadb_server::config(const std::string& user) const
{
    mariadb::config c;
    c.host = "127.0.0.1";
    c.port = port_;
    c.user = user;
    c.password = "secret";
    c.database = "dlock";
    return c;
}

std::string mariadb_server::sql(const std::string& text) const
{
    return run_client({"/usr/bin/mariadb", "--no-defaults", "--socket=" + dir_ + "/s", "-uroot", "-N", "-B",
                       "--connect-timeout=10", "-e", text},
                      {}, "mariadb client failed: " + text);
}

}  // namespace dlock::test
