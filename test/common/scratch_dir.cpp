// SPDX-License-Identifier: BSL-1.0
#include "common/scratch_dir.hpp"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace dlock::test {

namespace {

// Every directory made in this process, removed at its exit (children leave by _exit after
// a failed exec, so they never run this).
struct scratch_list {
    std::mutex m;
    std::vector<std::string> dirs;
    ~scratch_list()
    {
        if (std::getenv("DLOCK_KEEP_SCRATCH"))
            return;
        for (auto& d : dirs) {
            std::error_code ec;
            std::filesystem::remove_all(d, ec);
        }
    }
};

scratch_list& scratch()
{
    static scratch_list s;
    return s;
}

}  // namespace

std::string scratch_dir(const std::string& prefix)
{
    std::string path = "/tmp/" + prefix + "-XXXXXX";
    if (!::mkdtemp(path.data()))
        throw std::runtime_error("cannot make the directory " + path);
    auto& s = scratch();
    std::lock_guard<std::mutex> g(s.m);
    s.dirs.push_back(path);
    return path;
}

}  // namespace dlock::test
