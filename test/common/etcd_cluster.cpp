// SPDX-License-Identifier: BSL-1.0
#include "common/etcd_cluster.hpp"

#include "common/redis_server.hpp"

#include <boost/json/parse.hpp>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
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

}  // namespace

etcd_cluster::etcd_cluster(std::size_t members, etcd_options opts) : opts_(opts)
{
    char tmpl[] = "/tmp/dlock-etcd-XXXXXX";
    if (!::mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    token_ = "dlock-test-" + std::to_string(::getpid()) + "-" + dir_.substr(dir_.size() - 6);
    for (std::size_t i = 0; i < members; ++i) {
        member m;
        m.name = "m" + std::to_string(i);
        m.dir = dir_ + "/" + m.name;
        m.log = dir_ + "/" + m.name + ".log";
        m.client_port = free_port();
        m.peer_port = free_port();
        members_.push_back(m);
    }
    try {
        // A new cluster needs its majority up before any member serves: start all, then wait.
        for (std::size_t i = 0; i < members; ++i)
            launch(i, false);
        for (std::size_t i = 0; i < members; ++i)
            wait_ready(i, 0);
        if (!wait_leader(std::chrono::seconds(20)))
            throw std::runtime_error("etcd_cluster: no leader elected within 20 s");
    } catch (...) {
        for (std::size_t i = 0; i < members_.size(); ++i)
            kill(i);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        throw;
    }
}

etcd_cluster::~etcd_cluster()
{
    for (std::size_t i = 0; i < members_.size(); ++i)
        kill(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void etcd_cluster::launch(std::size_t i, bool existing)
{
    auto& m = members_.at(i);
    std::string initial;
    for (auto& o : members_)
        initial += (initial.empty() ? "" : ",") + o.name + "=http://127.0.0.1:" + std::to_string(o.peer_port);
    std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
    std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
    std::vector<std::string> argv = {"etcd",
                                     "--name=" + m.name,
                                     "--data-dir=" + m.dir,
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=" + initial,
                                     "--initial-cluster-token=" + token_,
                                     std::string("--initial-cluster-state=") + (existing ? "existing" : "new"),
                                     "--heartbeat-interval=" + std::to_string(opts_.heartbeat.count()),
                                     "--election-timeout=" + std::to_string(opts_.election_timeout.count()),
                                     "--unsafe-no-fsync",
                                     "--logger=zap",
                                     "--log-outputs=" + m.log};
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
        ::dup2(devnull, 0);
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    m.pid = pid;
}

// Ready when the member's log says it serves clients (after `log_offset`: a restarted
// member appends to the same log). The log is a file, read again every few milliseconds.
void etcd_cluster::wait_ready(std::size_t i, std::size_t log_offset)
{
    auto& m = members_.at(i);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        auto log = read_file(m.log);
        if (log.size() > log_offset && log.find("serving client traffic", log_offset) != std::string::npos)
            return;
        int st = 0;
        if (::waitpid(m.pid, &st, WNOHANG) == m.pid) {
            m.pid = -1;
            throw std::runtime_error("etcd member " + m.name + " exited (is etcd installed?): " + log_tail(i));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("etcd member " + m.name + " not ready within 30 s: " + log_tail(i));
}

void etcd_cluster::kill(std::size_t i)
{
    auto& m = members_.at(i);
    if (m.pid <= 0)
        return;
    ::kill(m.pid, SIGCONT);
    ::kill(m.pid, SIGKILL);
    ::waitpid(m.pid, nullptr, 0);
    m.pid = -1;
}

void etcd_cluster::start(std::size_t i)
{
    if (members_.at(i).pid > 0)
        return;
    auto offset = read_file(members_.at(i).log).size();
    launch(i, true);
    wait_ready(i, offset);
}

void etcd_cluster::pause(std::size_t i)
{
    if (members_.at(i).pid > 0)
        ::kill(members_.at(i).pid, SIGSTOP);
}

void etcd_cluster::resume(std::size_t i)
{
    if (members_.at(i).pid > 0)
        ::kill(members_.at(i).pid, SIGCONT);
}

std::string etcd_cluster::url() const
{
    return "etcd://" + endpoints_csv();
}

std::string etcd_cluster::endpoints_csv() const
{
    std::string s;
    for (auto& m : members_)
        s += (s.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(m.client_port);
    return s;
}

std::string etcd_cluster::etcdctl(const std::vector<std::string>& args, int* status) const
{
    std::string eps;
    for (auto& m : members_)
        if (m.pid > 0)
            eps += (eps.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(m.client_port);
    std::vector<std::string> argv = {"env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + eps, "--command-timeout=3s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_capture(argv, status);
}

std::size_t etcd_cluster::leader() const
{
    // Each running member's view: its own id and the leader it follows.
    int st = 0;
    auto out = etcdctl({"endpoint", "status", "-w", "json"}, &st);
    boost::system::error_code ec;
    auto v = boost::json::parse(out, ec);
    if (ec || !v.is_array())
        return size();
    std::map<std::uint64_t, std::size_t> index_of;
    std::uint64_t agreed = 0;
    std::size_t answers = 0;
    for (auto& e : v.as_array()) {
        // A member that did not answer in time has no Status: no agreement yet.
        auto* o = e.if_object();
        auto* epv = o ? o->if_contains("Endpoint") : nullptr;
        auto* sv = o ? o->if_contains("Status") : nullptr;
        auto* hv = sv && sv->is_object() ? sv->as_object().if_contains("header") : nullptr;
        auto* idv = hv && hv->is_object() ? hv->as_object().if_contains("member_id") : nullptr;
        auto* leadv = sv && sv->is_object() ? sv->as_object().if_contains("leader") : nullptr;
        if (!epv || !epv->is_string() || !idv || !leadv || !idv->is_number() || !leadv->is_number())
            return size();
        auto ep = epv->as_string();
        boost::system::error_code nec;
        auto id = idv->to_number<std::uint64_t>(nec);
        auto lead = leadv->to_number<std::uint64_t>(nec);
        if (nec)
            return size();
        for (std::size_t i = 0; i < members_.size(); ++i)
            if (ep == "127.0.0.1:" + std::to_string(members_[i].client_port))
                index_of[id] = i;
        if (lead == 0 || (agreed != 0 && lead != agreed))
            return size();
        agreed = lead;
        ++answers;
    }
    std::size_t running = 0;
    for (auto& m : members_)
        running += m.pid > 0;
    if (answers != running || !index_of.count(agreed))
        return size();
    return index_of[agreed];
}

bool etcd_cluster::wait_leader(std::chrono::milliseconds limit) const
{
    auto deadline = std::chrono::steady_clock::now() + limit;
    do {
        if (leader() < size())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
}

std::string etcd_cluster::log_tail(std::size_t i) const
{
    auto log = read_file(members_.at(i).log);
    return log.size() > 1500 ? log.substr(log.size() - 1500) : log;
}

}  // namespace dlock::test
