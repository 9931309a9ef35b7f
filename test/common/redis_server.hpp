// SPDX-License-Identifier: BSL-1.0
// Starts and stops throwaway redis-server processes on free loopback ports for tests.
#pragma once

#include <dlock/redis/config.hpp>

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::test {

struct server_options {
    std::string password;                ///< --requirepass
    std::string acl_user, acl_password;  ///< an extra ACL user with all permissions
    bool tls = false;                    ///< TLS only, with a throwaway CA and certificate
    bool unix_socket = false;            ///< also listen on a unix socket
    bool appendonly = false;             ///< persistence, so data survives restart()
    std::vector<std::string> extra_args;
    /// Written to <dir>/redis.conf and loaded first (Sentinel needs a config file).
    std::string config_text;
    /// The log line that says the process is ready (a sentinel says "+monitor master").
    std::string ready_marker = "Ready to accept connections";
};

/// One redis-server child process. The port and data directory stay the same across
/// restart(), so clients can reconnect and persisted data comes back.
class redis_server {
public:
    explicit redis_server(server_options opts = {});
    ~redis_server();
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    void kill();   ///< SIGKILL and reap
    void stop();   ///< SIGTERM and reap (saves data if appendonly)
    void start();  ///< start again on the same port and directory; returns when ready
    void restart()
    {
        kill();
        start();
    }
    void pause();   ///< SIGSTOP
    void resume();  ///< SIGCONT
    bool running() const noexcept { return pid_ > 0; }

    std::uint16_t port() const noexcept { return port_; }
    const std::string& dir() const noexcept { return dir_; }
    std::string unix_path() const { return dir_ + "/redis.sock"; }
    std::string ca_file() const { return dir_ + "/ca.crt"; }
    std::string url() const;
    redis::config config() const;

    /// Runs redis-cli against this server and returns its trimmed stdout.
    std::string cli(const std::vector<std::string>& args) const;
    /// The keys matching a KEYS pattern (for tests that check nothing is left behind).
    std::vector<std::string> keys(const std::string& pattern) const;

private:
    void make_certs();
    server_options opts_;
    std::string dir_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

/// A port on 127.0.0.1 that was free a moment ago.
std::uint16_t free_port();

/// Runs a command, waits for it, returns stdout; throws if it cannot start.
std::string run_capture(const std::vector<std::string>& argv, int* status = nullptr);

}  // namespace dlock::test
