// SPDX-License-Identifier: BSL-1.0
#include "common/redis_server.hpp"

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
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace dlock::test {

std::uint16_t free_port()
{
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        throw std::runtime_error("free_port: bind failed");
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

namespace {

pid_t spawn(const std::vector<std::string>& argv, int stdout_fd)
{
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        // Dies with the test process, even one that crashed before its destructors ran.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = ::open("/dev/null", O_RDWR);
        ::dup2(devnull, 0);
        ::dup2(devnull, 2);
        if (stdout_fd < 0)
            ::dup2(devnull, 1);
        if (stdout_fd >= 0) {
            ::dup2(stdout_fd, 1);
            ::close(stdout_fd);
        }
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    return pid;
}

}  // namespace

std::string run_capture(const std::vector<std::string>& argv, int* status)
{
    int fds[2];
    if (::pipe(fds) != 0)
        throw std::runtime_error("pipe failed");
    pid_t pid = spawn(argv, fds[1]);
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0)
        out.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (status)
        *status = st;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
        out.pop_back();
    return out;
}

redis_server::redis_server(server_options opts) : opts_(std::move(opts))
{
    char tmpl[] = "/tmp/dlock-redis-XXXXXX";
    if (!::mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    if (opts_.tls)
        make_certs();
    port_ = free_port();
    start();
}

redis_server::~redis_server()
{
    kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void redis_server::make_certs()
{
    auto run = [](std::vector<std::string> argv) {
        int st = 0;
        argv.insert(argv.begin(), "openssl");
        run_capture(argv, &st);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            throw std::runtime_error("openssl failed while making test certificates");
    };
    std::string d = dir_ + "/";
    run({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=dlock-test-ca", "-keyout",
         d + "ca.key", "-out", d + "ca.crt"});
    run({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", d + "server.key", "-out",
         d + "server.csr"});
    {
        FILE* f = std::fopen((d + "ext.cnf").c_str(), "w");
        std::fputs("subjectAltName=IP:127.0.0.1,DNS:localhost\n", f);
        std::fclose(f);
    }
    run({"x509", "-req", "-in", d + "server.csr", "-CA", d + "ca.crt", "-CAkey", d + "ca.key", "-CAcreateserial",
         "-days", "2", "-extfile", d + "ext.cnf", "-out", d + "server.crt"});
}

void redis_server::start()
{
    if (pid_ > 0)
        return;
    for (int attempt = 0; attempt < 5; ++attempt) {
        std::vector<std::string> argv = {
            "redis-server", "--bind",    "127.0.0.1", "--dir",      dir_,     "--save",           "",  "--daemonize",
            "no",           "--logfile", "",          "--loglevel", "notice", "--protected-mode", "no"};
        std::string p = std::to_string(port_);
        if (opts_.tls) {
            argv.insert(argv.end(),
                        {"--port", "0", "--tls-port", p, "--tls-cert-file", dir_ + "/server.crt", "--tls-key-file",
                         dir_ + "/server.key", "--tls-ca-cert-file", ca_file(), "--tls-auth-clients", "no"});
        } else {
            argv.insert(argv.end(), {"--port", p});
        }
        if (opts_.unix_socket)
            argv.insert(argv.end(), {"--unixsocket", unix_path(), "--unixsocketperm", "700"});
        if (!opts_.password.empty())
            argv.insert(argv.end(), {"--requirepass", opts_.password});
        if (!opts_.acl_user.empty())
            // One argv element per ACL rule: redis-server quotes an element holding spaces,
            // which would make the whole rule list the user name.
            argv.insert(argv.end(), {"--user", opts_.acl_user, "on", ">" + opts_.acl_password, "~*", "&*", "+@all"});
        if (opts_.appendonly)
            argv.insert(argv.end(), {"--appendonly", "yes", "--appendfsync", "always"});
        else
            argv.insert(argv.end(), {"--appendonly", "no"});
        argv.insert(argv.end(), opts_.extra_args.begin(), opts_.extra_args.end());
        if (!opts_.config_text.empty()) {
            // Written once: a sentinel rewrites it with what it learnt, which a restart keeps.
            std::string conf = dir_ + "/redis.conf";
            if (!std::filesystem::exists(conf)) {
                FILE* f = std::fopen(conf.c_str(), "w");
                std::fputs(opts_.config_text.c_str(), f);
                std::fclose(f);
            }
            argv.insert(argv.begin() + 1, conf);
        }

        int fds[2];
        if (::pipe(fds) != 0)
            throw std::runtime_error("pipe failed");
        pid_ = spawn(argv, fds[1]);
        ::close(fds[1]);
        // Ready when the server says so on its log (stdout): no sleeping, no polling.
        std::string log;
        bool ready = false;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!ready) {
            auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                break;
            pollfd pfd{fds[0], POLLIN, 0};
            if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0)
                break;
            char buf[4096];
            ssize_t n = ::read(fds[0], buf, sizeof buf);
            if (n <= 0)
                break;  // exited (port taken?)
            log.append(buf, static_cast<std::size_t>(n));
            ready = log.find(opts_.ready_marker) != std::string::npos;
        }
        // Keep draining the log in the background is unnecessary: redis writes little after
        // start, and a full pipe only blocks it past 64 KiB. Redirect the rest to /dev/null.
        ::close(fds[0]);
        if (ready)
            return;
        kill();
        port_ = free_port();
    }
    throw std::runtime_error("redis-server did not start (is it installed?)");
}

void redis_server::kill()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

void redis_server::stop()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

void redis_server::pause()
{
    if (pid_ > 0)
        ::kill(pid_, SIGSTOP);
}

void redis_server::resume()
{
    if (pid_ > 0)
        ::kill(pid_, SIGCONT);
}

std::string redis_server::url() const
{
    return std::string(opts_.tls ? "rediss" : "redis") + "://127.0.0.1:" + std::to_string(port_);
}

redis::config redis_server::config() const
{
    redis::config c;
    c.kind = opts_.tls ? redis::transport::tls : redis::transport::tcp;
    c.host = "127.0.0.1";
    c.port = port_;
    c.password = opts_.password;
    if (opts_.tls)
        c.tls_ca_file = ca_file();
    return c;
}

std::string redis_server::cli(const std::vector<std::string>& args) const
{
    std::vector<std::string> argv = {"redis-cli", "-h", "127.0.0.1", "-p", std::to_string(port_)};
    if (opts_.tls)
        argv.insert(argv.end(), {"--tls", "--cacert", ca_file()});
    if (!opts_.password.empty())
        argv.insert(argv.end(), {"--no-auth-warning", "-a", opts_.password});
    argv.insert(argv.end(), args.begin(), args.end());
    return run_capture(argv);
}

std::vector<std::string> redis_server::keys(const std::string& pattern) const
{
    std::istringstream in(cli({"KEYS", pattern}));
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            out.push_back(line);
    return out;
}

}  // namespace dlock::test
