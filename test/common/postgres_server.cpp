#include "common/postgres_server.hpp"

#include "common/redis_server.hpp"  // free_port

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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

const std::string bin = "/usr/lib/postgresql/15/bin/";
constexpr const char* super_password = "super-secret";

struct spawn_options {
    std::string out;  // file for stdout and stderr ("" : /dev/null)
    bool drop = false;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<std::string> env{};
};

// fork + exec; the child drops to uid/gid first if asked, and dies with the test.
pid_t spawn(std::vector<std::string> argv, const spawn_options& o, int out_fd = -1)
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
        int out = out_fd >= 0 ? out_fd
                              : (o.out.empty() ? devnull : ::open(o.out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
        ::dup2(devnull, 0);
        ::dup2(out, 1);
        ::dup2(out_fd >= 0 ? devnull : out, 2);
        if (o.drop && (::setgroups(0, nullptr) != 0 || ::setgid(o.gid) != 0 || ::setuid(o.uid) != 0))
            ::_exit(126);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
        for (const auto& e : o.env)
            ::putenv(const_cast<char*>(e.c_str()));
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

postgres_server::postgres_server()
{
    char tmpl[] = "/tmp/dlock-pg-XXXXXX";
    if (!::mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    if (::geteuid() == 0) {
        // PostgreSQL refuses to run as root.
        if (!::getpwnam("dlock-pg") &&
            std::system("useradd --system --no-create-home --shell /usr/sbin/nologin dlock-pg >/dev/null 2>&1") != 0 &&
            !::getpwnam("dlock-pg"))
            throw std::runtime_error("cannot create the user dlock-pg");
        auto* pw = ::getpwnam("dlock-pg");
        uid_ = pw->pw_uid;
        gid_ = pw->pw_gid;
        as_other_ = true;
    }
    {
        std::ofstream pw(dir_ + "/pwfile");
        pw << super_password << "\n";
    }
    if (as_other_) {
        for (const auto& p : {dir_, dir_ + "/pwfile"})
            if (::chown(p.c_str(), uid_, gid_) != 0)
                throw std::runtime_error("chown " + p + " failed");
    }
    ::chmod(dir_.c_str(), 0700);
    spawn_options o{dir_ + "/initdb.log", as_other_, uid_, gid_};
    auto pid = spawn({bin + "initdb", "-D", dir_ + "/data", "-U", "postgres", "--auth=scram-sha-256",
                      "--pwfile=" + dir_ + "/pwfile", "-E", "UTF8", "--no-sync", "--no-instructions"},
                     o);
    if (wait_exit(pid) != 0)
        throw std::runtime_error("initdb failed: " + slurp(dir_ + "/initdb.log"));
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
    if (pid_ > 0)
        return;
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (port_ == 0 || attempt > 0)
            port_ = free_port();
        std::string log = dir_ + "/postgres.log";
        auto before = slurp(log).size();
        spawn_options o{log, as_other_, uid_, gid_};
        pid_ = spawn({bin + "postgres", "-D", dir_ + "/data", "-p", std::to_string(port_), "-k", dir_, "-c",
                      "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=60"},
                     o);
        if (as_other_)
            ::chown(log.c_str(), uid_, gid_);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            int st = 0;
            if (::waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            if (slurp(log).find("database system is ready to accept connections", before) != std::string::npos)
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        stop();
    }
    throw std::runtime_error("postgres did not start: " + slurp(dir_ + "/postgres.log"));
}

void postgres_server::stop(bool immediate)
{
    if (pid_ <= 0)
        return;
    // SIGINT: fast shutdown (does not wait for clients); SIGQUIT: immediate, like a crash
    // (no checkpoint; the next start replays the WAL).
    ::kill(pid_, immediate ? SIGQUIT : SIGINT);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
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
    int fds[2];
    if (::pipe(fds) != 0)
        throw std::runtime_error("pipe failed");
    spawn_options o;
    o.env = {std::string("PGPASSWORD=") + super_password, "PGCONNECT_TIMEOUT=10"};
    // Before CREATE DATABASE dlock: connect to `postgres`.
    bool early = sql.rfind("CREATE ROLE", 0) == 0 || sql.rfind("CREATE DATABASE", 0) == 0;
    auto pid = spawn({bin + "psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                      std::to_string(port_), "-U", "postgres", "-d", early ? "postgres" : "dlock", "-c", sql},
                     o, fds[1]);
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    if (wait_exit(pid) != 0)
        throw std::runtime_error("psql failed: " + sql);
    return out;
}

}  // namespace dlock::test
