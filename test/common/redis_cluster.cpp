// SPDX-License-Identifier: BSL-1.0
#include "common/redis_cluster.hpp"

#include <sys/wait.h>

#include <chrono>
#include <sstream>
#include <stdexcept>

namespace dlock::test {

redis_cluster::redis_cluster(std::size_t masters)
{
    for (std::size_t i = 0; i < masters; ++i) {
        server_options o;
        // The bus port is chosen too: the default (port + 10000) may be taken or above 65535.
        // The config file is relative to --dir, so it lands in the server's own directory.
        o.extra_args = {"--cluster-enabled",      "yes",
                        "--cluster-config-file",  "nodes.conf",
                        "--cluster-port",         std::to_string(free_port()),
                        "--cluster-node-timeout", "5000"};
        servers_.push_back(std::make_unique<redis_server>(o));
    }
    std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
    for (std::size_t i = 0; i < masters; ++i)
        argv.push_back(address(i));
    argv.insert(argv.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    int status = 0;
    auto out = run_capture(argv, &status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error("redis-cli --cluster create failed: " + out);
    if (!wait_ok())
        throw std::runtime_error("the cluster did not reach cluster_state:ok");
    for (auto& s : servers_)
        ids_.push_back(s->cli({"CLUSTER", "MYID"}));
}

std::vector<redis::config> redis_cluster::seeds() const
{
    std::vector<redis::config> out;
    for (auto& s : servers_)
        out.push_back(s->config());
    return out;
}

std::string redis_cluster::address(std::size_t i) const
{
    return "127.0.0.1:" + std::to_string(servers_.at(i)->port());
}

std::size_t redis_cluster::index_of_port(std::uint16_t port) const
{
    for (std::size_t i = 0; i < servers_.size(); ++i)
        if (servers_[i]->port() == port)
            return i;
    return servers_.size();
}

std::size_t redis_cluster::owner_of(unsigned slot) const
{
    // CLUSTER SLOTS in redis-cli's plain output: start, end, host, port, id per line.
    std::istringstream in(servers_.front()->cli({"CLUSTER", "SLOTS"}));
    std::vector<std::string> words;
    for (std::string w; std::getline(in, w);)
        words.push_back(w);
    for (std::size_t i = 0; i + 3 < words.size(); ++i) {
        // A range starts with two numbers followed by a host line.
        if (words[i + 2] != "127.0.0.1")
            continue;
        try {
            unsigned first = static_cast<unsigned>(std::stoul(words[i]));
            unsigned last = static_cast<unsigned>(std::stoul(words[i + 1]));
            if (first <= slot && slot <= last)
                return index_of_port(static_cast<std::uint16_t>(std::stoul(words[i + 3])));
        } catch (const std::exception&) {
        }
    }
    return servers_.size();
}

bool redis_cluster::wait_ok() const
{
    // A bounded loop on the condition; each round is three redis-cli runs.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        bool ok = true;
        for (auto& s : servers_)
            ok = ok && s->cli({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
        if (ok)
            return true;
    }
    return false;
}

void redis_cluster::begin_migration(unsigned slot, std::size_t from, std::size_t to)
{
    auto s = std::to_string(slot);
    auto r1 = node(to).cli({"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
    auto r2 = node(from).cli({"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)});
    if (r1 != "OK" || r2 != "OK")
        throw std::runtime_error("SETSLOT IMPORTING/MIGRATING failed: " + r1 + " / " + r2);
}

std::size_t redis_cluster::migrate_keys(unsigned slot, std::size_t from, std::size_t to)
{
    std::istringstream in(node(from).cli({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "1000"}));
    std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(node(to).port()), "", "0", "5000", "KEYS"};
    std::size_t n = 0;
    for (std::string k; std::getline(in, k);)
        if (!k.empty()) {
            args.push_back(k);
            ++n;
        }
    if (n == 0)
        return 0;
    auto r = node(from).cli(args);
    if (r != "OK")
        throw std::runtime_error("MIGRATE failed: " + r);
    return n;
}

void redis_cluster::finish_migration(unsigned slot, std::size_t to)
{
    auto s = std::to_string(slot);
    // The target first (it takes ownership), then the others, as redis-cli does.
    std::vector<std::size_t> order{to};
    for (std::size_t i = 0; i < size(); ++i)
        if (i != to)
            order.push_back(i);
    for (auto i : order) {
        auto r = node(i).cli({"CLUSTER", "SETSLOT", s, "NODE", id(to)});
        if (r != "OK")
            throw std::runtime_error("SETSLOT NODE failed on node " + std::to_string(i) + ": " + r);
    }
}

}  // namespace dlock::test
