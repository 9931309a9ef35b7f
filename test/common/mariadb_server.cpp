#include "common/mariadb_server.hpp"

#include "common/redis_server.hpp"  // free_port

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dlock::test {

namespace {

// fork + exec with stdout (and stderr, unless out_fd is a pipe) to `out`; dies with the test.
pid_t spawn(std::vector<std::string> argv, const std::string& out, int out_fd = -1)
{
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        int devnull = ::open("/dev/null", O_RDWR);
        int fd =
            out_fd >= 0 ? out_fd : (out.empty() ? devnull : ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
        ::dup2(devnull, 0);
        ::dup2(fd, 1);
        ::dup2(out_fd >= 0 ? devnull : fd, 2);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    return pid;
}

int wait_exit(pid_t pid)
{
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string slurp(const std::string& path)
{
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

}  // namespace

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
    if (wait_exit(spawn(install, dir_ + "/install.log")) != 0)
        throw std::runtime_error("mariadb-install-db failed: " + slurp(dir_ + "/install.log"));
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
    if (pid_ > 0)
        return;
    const std::string log = dir_ + "/error.log";
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (port_ == 0 || attempt > 0)
            port_ = free_port();
        auto before = slurp(log).size();
        std::vector<std::string> argv{"/usr/sbin/mariadbd",
                                      "--no-defaults",
                                      "--datadir=" + dir_ + "/data",
                                      "--socket=" + dir_ + "/s",
                                      "--pid-file=" + dir_ + "/pid",
                                      "--log-error=" + log,
                                      "--port=" + std::to_string(port_),
                                      "--bind-address=127.0.0.1",
                                      "--skip-name-resolve",
                                      "--innodb-flush-log-at-trx-commit=2",
                                      "--innodb-buffer-pool-size=32M",
                                      "--max-connections=300"};
        if (::geteuid() == 0)
            argv.push_back("--user=root");
        pid_ = spawn(argv, dir_ + "/stdout.log");
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            int st = 0;
            if (::waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            if (slurp(log).find("ready for connections", before) != std::string::npos)
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        stop(true);
    }
    throw std::runtime_error("mariadbd did not start: " + slurp(log));
}

void mariadb_server::stop(bool kill)
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, kill ? SIGKILL : SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
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
    int fds[2];
    if (::pipe(fds) != 0)
        throw std::runtime_error("pipe failed");
    auto pid = spawn({"/usr/bin/mariadb", "--no-defaults", "--socket=" + dir_ + "/s", "-uroot", "-N", "-B",
                      "--connect-timeout=10", "-e", text},
                     "", fds[1]);
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    if (wait_exit(pid) != 0)
        throw std::runtime_error("mariadb client failed: " + text);
    return out;
}

}  // namespace dlock::test
