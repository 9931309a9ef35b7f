// SPDX-License-Identifier: BSL-1.0
// A fresh directory under /tmp for a test's own files (logs, counters), removed when the
// test process exits, so that a run leaves nothing behind; DLOCK_KEEP_SCRATCH=1 keeps them
// to read a failed run's logs. (Servers' directories are their launchers' to remove.)
#pragma once

#include <string>

namespace dlock::test {

/// `/tmp/<prefix>-XXXXXX`, made now; throws std::runtime_error if it cannot be.
std::string scratch_dir(const std::string& prefix);

}  // namespace dlock::test
