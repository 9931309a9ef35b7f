// SPDX-License-Identifier: BSL-1.0
#include "cli/child_process.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace dlock::cli {

spawn_result spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const sigset_t& mask,
                   const std::vector<int>& ignored)
{
    // Everything the child needs is built before fork: after it, only async-signal-safe calls.
    std::vector<char*> args, envp;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env)
        envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
        return {-1, errno};
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) {
        int e = errno;
        ::close(pipe_fds[0]);
        ::close(pipe_fds[1]);
        return {-1, e};
    }
    if (pid == 0) {
        ::close(pipe_fds[0]);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent)  // dlock died before prctl took effect
            ::_exit(128 + SIGTERM);
        struct sigaction dfl {
        }, ign{};
        dfl.sa_handler = SIG_DFL;
        ign.sa_handler = SIG_IGN;
        for (int sig = 1; sig < NSIG; ++sig)
            ::sigaction(sig, &dfl, nullptr);
        for (int sig : ignored)
            ::sigaction(sig, &ign, nullptr);
        ::sigprocmask(SIG_SETMASK, &mask, nullptr);
        // dlock's sockets must not leak into the command (and outlive dlock if it daemonizes).
        ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        ::execvpe(args[0], args.data(), envp.data());
        int e = errno;
        [[maybe_unused]] auto n = ::write(pipe_fds[1], &e, sizeof e);
        ::_exit(127);
    }
    ::close(pipe_fds[1]);
    int child_errno = 0;
    ssize_t n;
    do
        n = ::read(pipe_fds[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    ::close(pipe_fds[0]);
    if (n == static_cast<ssize_t>(sizeof child_errno)) {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return {-1, child_errno};
    }
    return {pid, 0};
}

std::vector<std::string> environment_with(const std::vector<std::string>& overrides)
{
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) {
        std::string entry(*e);
        auto key = entry.substr(0, entry.find('=') + 1);
        bool replaced = false;
        for (const auto& o : overrides)
            replaced = replaced || o.rfind(key, 0) == 0;
        if (!replaced)
            out.push_back(std::move(entry));
    }
    out.insert(out.end(), overrides.begin(), overrides.end());
    return out;
}

int exit_status_of(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}

}  // namespace dlock::cli
