// SPDX-License-Identifier: BSL-1.0
// What the lock_worker "count" processes leave behind, read back for the multi-process
// tests of every store: the shared counter, and the log each critical section appended to.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>

namespace dlock::test {

struct count_log {
    long counter = 0;              ///< the counter file's final value
    std::size_t lines = 0;         ///< critical sections logged
    bool monotonic = true;         ///< in file order, fencing tokens never go down
    bool exclusive_tokens = true;  ///< a token belongs to one process only
    std::size_t processes = 0;     ///< distinct processes that logged
    std::size_t switches = 0;      ///< times the lock moved to another process
};

/// Reads COUNTER_FILE and LOG_FILE ("pid token" per line, written inside the section).
inline count_log read_count_log(const std::string& counter_file, const std::string& log_file)
{
    count_log r;
    std::ifstream(counter_file) >> r.counter;
    std::ifstream l(log_file);
    std::string pid, prev;
    std::uint64_t token = 0, last = 0;
    std::map<std::uint64_t, std::string> owner_of;
    std::map<std::string, int> per_process;
    while (l >> pid >> token) {
        ++r.lines;
        r.monotonic = r.monotonic && token >= last;
        last = token;
        auto [it, inserted] = owner_of.emplace(token, pid);
        r.exclusive_tokens = r.exclusive_tokens && (inserted || it->second == pid);
        ++per_process[pid];
        r.switches += !prev.empty() && prev != pid;
        prev = pid;
    }
    r.processes = per_process.size();
    return r;
}

/// Reads the files back and makes the checks every multi-process test makes: the count is
/// exact, every section was logged, tokens never go down and belong to one process each,
/// and every process took part. Returns what it read, for further checks.
inline count_log check_count_log(const std::string& counter_file, const std::string& log_file, int processes,
                                 int sections_total)
{
    auto r = read_count_log(counter_file, log_file);
    BOOST_TEST(r.counter == sections_total);
    BOOST_TEST(r.lines == static_cast<std::size_t>(sections_total));
    BOOST_TEST(r.monotonic);
    BOOST_TEST(r.exclusive_tokens);
    BOOST_TEST(r.processes == static_cast<std::size_t>(processes));
    return r;
}

}  // namespace dlock::test
