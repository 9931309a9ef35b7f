// SPDX-License-Identifier: BSL-1.0
// A child process for multi-process tests: its stdout is read line by line.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test {

class child {
public:
    explicit child(const std::vector<std::string>& argv);
    ~child();  // SIGKILL and reap if still running
    child(const child&) = delete;
    child& operator=(const child&) = delete;

    /// The next line of the child's stdout, or nullopt on EOF or after `limit`.
    std::optional<std::string> read_line(std::chrono::milliseconds limit = std::chrono::seconds(30));
    void signal(int sig);
    /// Waits for exit; returns the exit status (128 + signal if killed), -1 after `limit`.
    int wait(std::chrono::milliseconds limit = std::chrono::seconds(60));
    pid_t pid() const noexcept { return pid_; }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buf_;
};

/// Path of a helper executable built next to the tests (set by CMake).
std::string worker_path();

}  // namespace dlock::test
