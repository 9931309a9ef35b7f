// SPDX-License-Identifier: BSL-1.0
// A throwaway memcached process on a free loopback port, for tests.
#pragma once

#include <dlock/memcached/config.hpp>

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::test {

/// One memcached child (`-M`: out of memory refuses rather than evicting, `-m 16`, one
/// thread). Ready when it answers `mn` (memcached logs nothing when it is up). The port
/// stays the same across restart(); the data does not (memcached keeps none).
class memcached_server {
public:
    explicit memcached_server(std::vector<std::string> extra_args = {});
    ~memcached_server();
    memcached_server(const memcached_server&) = delete;
    memcached_server& operator=(const memcached_server&) = delete;

    void kill();   ///< SIGKILL and reap
    void start();  ///< start on the same port; returns when it answers
    void restart()
    {
        kill();
        start();
    }
    bool running() const noexcept { return pid_ > 0; }
    std::uint16_t port() const noexcept { return port_; }
    std::string url() const;
    memcached::config config() const;

private:
    std::vector<std::string> extra_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

}  // namespace dlock::test
