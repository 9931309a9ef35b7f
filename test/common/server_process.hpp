// SPDX-License-Identifier: BSL-1.0
// The process side of the throwaway database servers (postgres_server, mariadb_server): fork
// and exec with the output in a file, as an unprivileged user if asked; a setup tool or a
// client run to its end; one long-running server, ready when its log says so.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test {

/// Whom a child runs as (setgroups, setgid and setuid before exec).
struct run_as {
    uid_t uid = 0;
    gid_t gid = 0;
};

/// As root: the system user `name` (created if missing), for servers that refuse to run as
/// root. Otherwise nullopt: the children run as the tests do.
std::optional<run_as> unprivileged_user(const std::string& name);

struct spawn_options {
    std::string out;                 ///< file for stdout and stderr, appended ("": /dev/null)
    std::optional<run_as> user{};    ///< drop to this user first (`out` is handed to it)
    std::vector<std::string> env{};  ///< NAME=value, added to the environment
};

/// fork + exec of `argv[0]` (a path), stdin from /dev/null; the child dies with the test. Its
/// stdout goes to `out_fd` if given (stderr then to /dev/null), else both to `o.out`.
pid_t spawn(std::vector<std::string> argv, const spawn_options& o, int out_fd = -1);

/// Waits for `pid` to exit: its exit status, or 128 + the signal that ended it.
int wait_exit(pid_t pid);

/// A file's contents ("" if it cannot be read).
std::string slurp(const std::string& path);

/// Runs a setup tool (initdb) to its end, its output in `o.out`; throws "<tool> failed:
/// <output>" if it fails.
void run_tool(const std::vector<std::string>& argv, const spawn_options& o);

/// Runs a client (psql) to its end and returns its stdout; throws `failure` if it fails.
std::string run_client(const std::vector<std::string>& argv, const spawn_options& o, const std::string& failure);

/// One long-running server process, stopped by `stop_signal` (SIGKILL after `grace`).
class server_process {
public:
    server_process(int stop_signal, std::chrono::seconds grace) : stop_signal_(stop_signal), grace_(grace) {}
    ~server_process();  ///< SIGKILL and reap if still running
    server_process(const server_process&) = delete;
    server_process& operator=(const server_process&) = delete;

    /// Spawns `argv_for(port)` and returns once `log` gains a line with `ready` (60 s at most).
    /// A server that exits or is not ready in time is stopped and tried again on a new free
    /// port (`port` 0: a free one from the start), five times in all; then throws "<name> did
    /// not start: <log>".
    void start(std::uint16_t& port, const std::function<std::vector<std::string>(std::uint16_t)>& argv_for,
               const spawn_options& o, const std::string& log, const std::string& ready, const std::string& name);
    /// Sends `sig`; SIGKILL if the server has not exited after the grace period; reaped.
    void stop(int sig);
    void stop() { stop(stop_signal_); }
    bool running() const noexcept { return pid_ > 0; }

private:
    pid_t pid_ = -1;
    int stop_signal_;
    std::chrono::seconds grace_;
};

}  // namespace dlock::test
