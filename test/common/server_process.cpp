// SPDX-License-Identifier: BSL-1.0
#include "common/server_process.hpp"

#include "common/redis_server.hpp"  // free_port

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::test {

std::optional<run_as> unprivileged_user(const std::string& name)
{
    if (::geteuid() != 0)
        return std::nullopt;
    std::string add = "useradd --system --no-create-home --shell /usr/sbin/nologin " + name + " >/dev/null 2>&1";
    if (!::getpwnam(name.c_str()) && std::system(add.c_str()) != 0 && !::getpwnam(name.c_str()))
        throw std::runtime_error("cannot create the user " + name);
    auto* pw = ::getpwnam(name.c_str());
    return run_as{pw->pw_uid, pw->pw_gid};
}

pid_t spawn(std::vector<std::string> argv, const spawn_options& o, int out_fd)
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
        if (o.user && out != devnull && out != out_fd)
            (void)::fchown(out, o.user->uid, o.user->gid);
        ::dup2(devnull, 0);
        ::dup2(out, 1);
        ::dup2(out_fd >= 0 ? devnull : out, 2);
        if (o.user && (::setgroups(0, nullptr) != 0 || ::setgid(o.user->gid) != 0 || ::setuid(o.user->uid) != 0))
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

void run_tool(const std::vector<std::string>& argv, const spawn_options& o)
{
    if (wait_exit(spawn(argv, o)) != 0)
        throw std::runtime_error(argv[0].substr(argv[0].rfind('/') + 1) + " failed: " + slurp(o.out));
}

std::string run_client(const std::vector<std::string>& argv, const spawn_options& o, const std::string& failure)
{
    int fds[2];
    if (::pipe(fds) != 0)
        throw std::runtime_error("pipe failed");
    auto pid = spawn(argv, o, fds[1]);
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    if (wait_exit(pid) != 0)
        throw std::runtime_error(failure);
    return out;
}

server_process::~server_process()
{
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

void server_process::start(std::uint16_t& port, const std::function<std::vector<std::string>(std::uint16_t)>& argv_for,
                           const spawn_options& o, const std::string& log, const std::string& ready,
                           const std::string& name)
{
    if (pid_ > 0)
        return;
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (port == 0 || attempt > 0)
            port = free_port();
        auto before = slurp(log).size();
        pid_ = spawn(argv_for(port), o);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            if (slurp(log).find(ready, before) != std::string::npos)
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        stop();
    }
    throw std::runtime_error(name + " did not start: " + slurp(log));
}

void server_process::stop(int sig)
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + grace_;
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

}  // namespace dlock::test
