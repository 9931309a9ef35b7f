// SPDX-License-Identifier: BSL-1.0
// A throwaway etcd cluster for tests: N members on free loopback ports (client and peer),
// throwaway data directories, short raft timings so 1 s leases work; members can be killed,
// paused and restarted, and etcdctl run against them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::test {

struct etcd_options {
    std::chrono::milliseconds heartbeat{25};
    /// The cluster's minimum lease is 1.5 x this, rounded up to whole seconds.
    std::chrono::milliseconds election_timeout{250};
};

class etcd_cluster {
public:
    /// Starts `members` etcd processes and returns once each says it serves clients and a
    /// leader is elected; throws (with the tail of a member's log) if not within 30 s.
    explicit etcd_cluster(std::size_t members = 3, etcd_options opts = {});
    ~etcd_cluster();  // kills every member and removes the directories
    etcd_cluster(const etcd_cluster&) = delete;
    etcd_cluster& operator=(const etcd_cluster&) = delete;

    std::size_t size() const noexcept { return members_.size(); }
    /// etcd://127.0.0.1:p1,127.0.0.1:p2,...
    std::string url() const;
    /// 127.0.0.1:p1,127.0.0.1:p2,... (etcdctl --endpoints)
    std::string endpoints_csv() const;
    std::uint16_t client_port(std::size_t i) const { return members_.at(i).client_port; }
    std::uint16_t peer_port(std::size_t i) const { return members_.at(i).peer_port; }
    bool running(std::size_t i) const { return members_.at(i).pid > 0; }

    void kill(std::size_t i);    ///< SIGKILL and reap
    void start(std::size_t i);   ///< again on the same ports and data; returns when it serves
    void pause(std::size_t i);   ///< SIGSTOP
    void resume(std::size_t i);  ///< SIGCONT

    /// The index of the member the running members agree leads; size() if none.
    std::size_t leader() const;
    /// True once a leader is elected and agreed on, within `limit`.
    bool wait_leader(std::chrono::milliseconds limit) const;

    /// Runs `etcdctl --endpoints=<running members> ARGS` (API v3); stdout, trimmed.
    std::string etcdctl(const std::vector<std::string>& args, int* status = nullptr) const;
    /// The last lines of member i's log, for failure messages.
    std::string log_tail(std::size_t i) const;

private:
    struct member {
        std::string name, dir, log;
        std::uint16_t client_port = 0, peer_port = 0;
        pid_t pid = -1;
    };
    void launch(std::size_t i, bool existing);
    void wait_ready(std::size_t i, std::size_t log_offset);
    std::vector<member> members_;
    std::string dir_, token_;
    etcd_options opts_;
};

}  // namespace dlock::test
