// SPDX-License-Identifier: BSL-1.0
// A throwaway ZooKeeper ensemble for tests: N servers (Debian's zookeeper jars on a headless
// JRE) on free loopback ports with throwaway data directories and a short tick, so sessions
// of a second or two work; servers can be killed, paused and restarted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::test {

class zk_ensemble {
public:
    /// Starts `servers` ZooKeeper servers and returns once each has joined a quorum (its log
    /// says LEADING or FOLLOWING; a single server: serving); throws with a log's tail if
    /// not within 60 s. tickTime 100 ms; sessions of 200 ms to 30 s are accepted.
    /// `properties`: Java system properties for every server ("name=value", e.g.
    /// "zookeeper.extendedTypesEnabled=true").
    explicit zk_ensemble(std::size_t servers = 3, std::vector<std::string> properties = {});
    ~zk_ensemble();  // kills every server and removes the directories
    zk_ensemble(const zk_ensemble&) = delete;
    zk_ensemble& operator=(const zk_ensemble&) = delete;

    std::size_t size() const noexcept { return servers_.size(); }
    /// zk://127.0.0.1:p1,127.0.0.1:p2,...  (with `query`, e.g. "?session_timeout=2s")
    std::string url(const std::string& query = {}) const;
    /// 127.0.0.1:p1,127.0.0.1:p2,... (Curator's connect string)
    std::string connect_string() const;
    std::uint16_t client_port(std::size_t i) const { return servers_.at(i).client_port; }
    bool running(std::size_t i) const { return servers_.at(i).pid > 0; }

    void kill(std::size_t i);    ///< SIGKILL and reap
    void start(std::size_t i);   ///< again on the same ports and data; returns once it rejoined
    void pause(std::size_t i);   ///< SIGSTOP
    void resume(std::size_t i);  ///< SIGCONT

    /// `srvr`'s "Mode:" of server i ("leader", "follower", "standalone"), empty if it does not answer.
    std::string mode(std::size_t i) const;
    /// `srvr`'s "Node count:" of server i (every znode it keeps), -1 if it does not answer.
    long node_count(std::size_t i) const;
    /// The index of the server that says it leads; size() if none.
    std::size_t leader() const;
    /// True once some server leads, within `limit`.
    bool wait_leader(std::chrono::milliseconds limit) const;
    std::string log_tail(std::size_t i) const;

    /// The classpath of Debian's ZooKeeper and Curator jars (for the interop program).
    static std::string curator_classpath();

private:
    struct server {
        std::string dir, log, cfg;
        std::uint16_t client_port = 0, quorum_port = 0, election_port = 0;
        pid_t pid = -1;
    };
    void launch(std::size_t i);
    void wait_ready(std::size_t i, std::size_t log_offset);
    std::vector<server> servers_;
    std::vector<std::string> properties_;
    std::string dir_;
};

/// Sends a four-letter word to 127.0.0.1:port and returns the answer ("" if none in 2 s).
std::string four_letter(std::uint16_t port, const std::string& word);

}  // namespace dlock::test
