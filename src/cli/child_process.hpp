// SPDX-License-Identifier: BSL-1.0
// The command `dlock run` supervises: started with fork/exec so that it dies with dlock.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace dlock::cli {

struct spawn_result {
    pid_t pid = -1;
    int error = 0;  ///< errno of the failed fork or exec (ENOENT: not found)
};

/// Starts argv[0] (searched in PATH) with `env` as its whole environment. The child gets
/// default signal dispositions but for `ignored` (kept ignored, as nohup wants), the
/// signal mask `mask` (dlock's own before it blocked the signals it reads), no other open
/// descriptor than 0-2, and SIGTERM when dlock dies (Linux PR_SET_PDEATHSIG), so a command
/// never outlives the lock it ran under. Exec failures come back through a close-on-exec
/// pipe, not as a mysterious exit status.
spawn_result spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const sigset_t& mask,
                   const std::vector<int>& ignored);

/// The current environment with `overrides` ("KEY=value") replacing or adding entries.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

/// A shell-style exit status from a waitpid status: the code, or 128 + signal.
int exit_status_of(int wait_status);

}  // namespace dlock::cli
