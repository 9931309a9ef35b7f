// SPDX-License-Identifier: BSL-1.0
#include "common/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

namespace dlock::test {

child::child(const std::vector<std::string>& argv)
{
    int fds[2];
    if (::pipe(fds) != 0)
        throw std::runtime_error("pipe failed");
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0)
        throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::dup2(fds[1], 1);
        ::close(fds[0]);
        ::close(fds[1]);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
}

child::~child()
{
    if (pid_ > 0) {
        ::kill(pid_, SIGCONT);
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0)
        ::close(out_);
}

std::optional<std::string> child::read_line(std::chrono::milliseconds limit)
{
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        auto nl = buf_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            return std::nullopt;
        pollfd pfd{out_, POLLIN, 0};
        if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0)
            return std::nullopt;
        char tmp[4096];
        ssize_t n = ::read(out_, tmp, sizeof tmp);
        if (n <= 0)
            return std::nullopt;
        buf_.append(tmp, static_cast<std::size_t>(n));
    }
}

void child::signal(int sig)
{
    if (pid_ > 0)
        ::kill(pid_, sig);
}

int child::wait(std::chrono::milliseconds limit)
{
    if (pid_ <= 0)
        return -1;
    // Drain stdout until EOF so a chatty child cannot block on a full pipe; EOF means exit.
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (
        read_line(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())))
        ;
    int st = 0;
    for (;;) {
        pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r == pid_)
            break;
        if (std::chrono::steady_clock::now() >= deadline)
            return -1;
        // EOF came first; the exit is imminent. Block for it.
        r = ::waitpid(pid_, &st, 0);
        if (r == pid_)
            break;
    }
    pid_ = -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return -1;
}

std::string worker_path()
{
    return DLOCK_WORKER_PATH;
}

}  // namespace dlock::test
