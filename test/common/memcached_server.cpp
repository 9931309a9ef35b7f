// SPDX-License-Identifier: BSL-1.0
#include "common/memcached_server.hpp"

#include "common/redis_server.hpp"  // free_port

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace dlock::test {

namespace {

// One `mn` round trip on a fresh connection: true once memcached answers MN.
bool answers(std::uint16_t port)
{
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::write(fd, "mn\r\n", 4) == 4) {
        pollfd p{fd, POLLIN, 0};
        char buf[16] = {};
        if (::poll(&p, 1, 1000) == 1 && ::read(fd, buf, sizeof buf - 1) >= 4)
            ok = std::strncmp(buf, "MN\r\n", 4) == 0;
    }
    ::close(fd);
    return ok;
}

}  // namespace

memcached_server::memcached_server(std::vector<std::string> extra_args) : extra_(std::move(extra_args))
{
    start();
}

memcached_server::~memcached_server()
{
    kill();
}

void memcached_server::start()
{
    if (pid_ > 0)
        return;
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (port_ == 0 || attempt > 0)
            port_ = free_port();
        std::vector<std::string> argv = {"memcached", "-l", "127.0.0.1", "-p", std::to_string(port_), "-U", "0", "-m",
                                         "16",        "-M", "-t",        "1"};
        if (::geteuid() == 0)
            argv.insert(argv.end(), {"-u", "root"});  // memcached refuses to run as root otherwise
        argv.insert(argv.end(), extra_.begin(), extra_.end());
        std::vector<char*> args;
        for (auto& a : argv)
            args.push_back(a.data());
        args.push_back(nullptr);
        pid_t pid = ::fork();
        if (pid < 0)
            throw std::runtime_error("fork failed");
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the test
            int devnull = ::open("/dev/null", O_RDWR);
            ::dup2(devnull, 0);
            ::dup2(devnull, 1);
            ::dup2(devnull, 2);
            ::execvp(args[0], args.data());
            ::_exit(127);
        }
        pid_ = pid;
        // Readiness: memcached logs nothing when it listens, so ask it (`mn`) until it
        // answers, or until the process has exited (port taken: try another).
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < deadline) {
            int st = 0;
            if (::waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            if (answers(port_))
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        kill();
    }
    throw std::runtime_error("memcached did not start (is it installed? apt-get install memcached)");
}

void memcached_server::kill()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

std::string memcached_server::url() const
{
    return "memcached://127.0.0.1:" + std::to_string(port_);
}

memcached::config memcached_server::config() const
{
    memcached::config c;
    c.servers = {{"127.0.0.1", port_}};
    return c;
}

}  // namespace dlock::test
