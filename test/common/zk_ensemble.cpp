// SPDX-License-Identifier: BSL-1.0
#include "common/zk_ensemble.hpp"

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

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::test {

namespace {

std::string read_file(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

constexpr const char* server_classpath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

}  // namespace

std::string four_letter(std::uint16_t port, const std::string& word)
{
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return {};
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::write(fd, word.data(), word.size()) == static_cast<ssize_t>(word.size())) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        char buf[4096];
        while (std::chrono::steady_clock::now() < deadline) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0)
                continue;
            auto n = ::read(fd, buf, sizeof buf);
            if (n <= 0)
                break;
            out.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    return out;
}

std::string zk_ensemble::curator_classpath()
{
    std::string cp;
    for (const char* jar : {"curator-recipes",
                            "curator-framework",
                            "curator-client",
                            "zookeeper",
                            "zookeeper-jute",
                            "guava",
                            "slf4j-api",
                            "slf4j-nop",
                            "netty-handler",
                            "netty-transport",
                            "netty-common",
                            "netty-buffer",
                            "netty-resolver",
                            "netty-codec",
                            "netty-transport-native-epoll",
                            "netty-transport-native-unix-common",
                            "commons-lang3",
                            "jline",
                            "audience-annotations",
                            "metrics-core",
                            "snappy-java"})
        if (std::filesystem::exists(std::string("/usr/share/java/") + jar + ".jar"))
            cp += (cp.empty() ? "" : ":") + std::string("/usr/share/java/") + jar + ".jar";
    return cp;
}

zk_ensemble::zk_ensemble(std::size_t n, std::vector<std::string> properties) : properties_(std::move(properties))
{
    char tmpl[] = "/tmp/dlock-zk-XXXXXX";
    if (!::mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    for (std::size_t i = 0; i < n; ++i) {
        server s;
        s.dir = dir_ + "/s" + std::to_string(i + 1);
        s.log = dir_ + "/s" + std::to_string(i + 1) + ".log";
        s.cfg = dir_ + "/s" + std::to_string(i + 1) + ".cfg";
        s.client_port = free_port();
        s.quorum_port = free_port();
        s.election_port = free_port();
        servers_.push_back(s);
    }
    for (std::size_t i = 0; i < n; ++i) {
        auto& s = servers_[i];
        std::filesystem::create_directories(s.dir);
        std::ofstream(s.dir + "/myid") << (i + 1) << "\n";
        std::ofstream c(s.cfg);
        c << "tickTime=100\ninitLimit=50\nsyncLimit=20\n"
          << "minSessionTimeout=200\nmaxSessionTimeout=30000\n"
          << "dataDir=" << s.dir << "\nclientPort=" << s.client_port << "\nclientPortAddress=127.0.0.1\n"
          << "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,mntr\nforceSync=no\n"
          << "preAllocSize=1024\nsnapCount=100000\n";
        if (n > 1)
            for (std::size_t j = 0; j < n; ++j)
                c << "server." << (j + 1) << "=127.0.0.1:" << servers_[j].quorum_port << ":"
                  << servers_[j].election_port << "\n";
    }
    try {
        for (std::size_t i = 0; i < n; ++i)
            launch(i);
        for (std::size_t i = 0; i < n; ++i)
            wait_ready(i, 0);
        if (!wait_leader(std::chrono::seconds(30)))
            throw std::runtime_error("zk_ensemble: no leader within 30 s: " + log_tail(0));
    } catch (...) {
        for (std::size_t i = 0; i < servers_.size(); ++i)
            kill(i);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        throw;
    }
}

zk_ensemble::~zk_ensemble()
{
    for (std::size_t i = 0; i < servers_.size(); ++i)
        kill(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void zk_ensemble::launch(std::size_t i)
{
    auto& s = servers_.at(i);
    std::vector<std::string> argv = {"java",
                                     "-Xmx128m",
                                     "-XX:+UseSerialGC",
                                     "-XX:TieredStopAtLevel=1",
                                     "-Xss512k",
                                     "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                                     "-Dzookeeper.admin.enableServer=false"};
    for (const auto& p : properties_)
        argv.push_back("-D" + p);
    for (const char* a : {"-cp", server_classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain"})
        argv.emplace_back(a);
    argv.push_back(s.cfg);
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the test, even a crashed one
        int devnull = ::open("/dev/null", O_RDWR);
        int log = ::open(s.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ::dup2(devnull, 0);
        ::dup2(log, 1);
        ::dup2(log, 2);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    s.pid = pid;
}

// Ready when the server's log (after `log_offset`: a restart appends) says it leads or
// follows a quorum, or serves alone.
void zk_ensemble::wait_ready(std::size_t i, std::size_t log_offset)
{
    auto& s = servers_.at(i);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const char* marks[] = {"- LEADING", "- FOLLOWING", "LEADER ELECTION TOOK", "binding to port"};
    std::size_t first = servers_.size() > 1 ? 0 : 3;
    std::size_t last = servers_.size() > 1 ? 3 : 4;
    while (std::chrono::steady_clock::now() < deadline) {
        auto log = read_file(s.log);
        for (std::size_t m = first; m < last; ++m)
            if (log.size() > log_offset && log.find(marks[m], log_offset) != std::string::npos)
                return;
        int st = 0;
        if (::waitpid(s.pid, &st, WNOHANG) == s.pid) {
            s.pid = -1;
            throw std::runtime_error("zookeeper server " + std::to_string(i + 1) +
                                     " exited (are zookeeper and a JRE installed?): " + log_tail(i));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("zookeeper server " + std::to_string(i + 1) + " not ready within 60 s: " + log_tail(i));
}

void zk_ensemble::kill(std::size_t i)
{
    auto& s = servers_.at(i);
    if (s.pid <= 0)
        return;
    ::kill(s.pid, SIGCONT);
    ::kill(s.pid, SIGKILL);
    ::waitpid(s.pid, nullptr, 0);
    s.pid = -1;
}

void zk_ensemble::start(std::size_t i)
{
    if (servers_.at(i).pid > 0)
        return;
    auto offset = read_file(servers_.at(i).log).size();
    launch(i);
    wait_ready(i, offset);
}

void zk_ensemble::pause(std::size_t i)
{
    if (servers_.at(i).pid > 0)
        ::kill(servers_.at(i).pid, SIGSTOP);
}

void zk_ensemble::resume(std::size_t i)
{
    if (servers_.at(i).pid > 0)
        ::kill(servers_.at(i).pid, SIGCONT);
}

std::string zk_ensemble::connect_string() const
{
    std::string s;
    for (auto& v : servers_)
        s += (s.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(v.client_port);
    return s;
}

std::string zk_ensemble::url(const std::string& query) const
{
    return "zk://" + connect_string() + query;
}

std::string zk_ensemble::mode(std::size_t i) const
{
    if (servers_.at(i).pid <= 0)
        return {};
    auto out = four_letter(servers_[i].client_port, "srvr");
    auto at = out.find("Mode: ");
    if (at == std::string::npos)
        return {};
    auto end = out.find('\n', at);
    return out.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

long zk_ensemble::node_count(std::size_t i) const
{
    if (servers_.at(i).pid <= 0)
        return -1;
    auto out = four_letter(servers_[i].client_port, "srvr");
    auto at = out.find("Node count: ");
    if (at == std::string::npos)
        return -1;
    return std::strtol(out.c_str() + at + 12, nullptr, 10);
}

std::size_t zk_ensemble::leader() const
{
    for (std::size_t i = 0; i < servers_.size(); ++i) {
        auto m = mode(i);
        if (m == "leader" || m == "standalone")
            return i;
    }
    return size();
}

bool zk_ensemble::wait_leader(std::chrono::milliseconds limit) const
{
    auto deadline = std::chrono::steady_clock::now() + limit;
    do {
        if (leader() < size())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
}

std::string zk_ensemble::log_tail(std::size_t i) const
{
    auto log = read_file(servers_.at(i).log);
    return log.size() > 1500 ? log.substr(log.size() - 1500) : log;
}

}  // namespace dlock::test
