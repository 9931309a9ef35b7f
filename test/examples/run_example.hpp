// SPDX-License-Identifier: BSL-1.0
// Runs an example as a user would, to its exit (bounded), and keeps what it printed.
#pragma once

#include "common/child.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace dlock::test {

struct example_run {
    int status = -1;  ///< exit status (child::wait's value)
    std::vector<std::string> lines;

    std::string text() const
    {
        std::string out;
        for (auto& l : lines)
            out += l + "\n";
        return out;
    }
    bool has(const std::string& line) const
    {
        for (auto& l : lines)
            if (l == line)
                return true;
        return false;
    }
};

inline example_run run_example(const std::vector<std::string>& argv,
                               std::chrono::milliseconds limit = std::chrono::seconds(60))
{
    child c(argv);
    example_run o;
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (auto line = c.read_line(
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())))
        o.lines.push_back(*line);
    o.status = c.wait(std::chrono::seconds(5));
    return o;
}

}  // namespace dlock::test
