// SPDX-License-Identifier: BSL-1.0
// The lock_worker "count" processes of the multi-process tests of every store: how one is
// started, how they are run to their end, and what they leave behind read back (the shared
// counter, and the log each critical section appended to).
#pragma once

#include "common/child.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

/// A lock_worker "count" process's arguments: COROUTINES coroutines of SECTIONS sections each
/// on NAME at WHERE (a URL, or a Redis port), on the shared COUNTER and LOG files.
inline std::vector<std::string> count_worker(const std::string& where, const std::string& name, int coroutines,
                                             int sections, const std::string& counter, const std::string& log)
{
    return {worker_path(), "count", where, name, std::to_string(coroutines), std::to_string(sections), counter, log};
}

/// The process says "done" within `limit` and exits with 0; returns its line (the worker's
/// stats follow "done").
inline std::string expect_done(child& w, std::chrono::seconds limit = std::chrono::seconds(120))
{
    auto line = w.read_line(limit);
    BOOST_TEST_MESSAGE("worker: " << line.value_or("<none>"));
    BOOST_TEST((line && line->rfind("done", 0) == 0), line.value_or("<none>"));
    BOOST_TEST(w.wait() == 0);
    return line.value_or("");
}

/// expect_done() for each process, in order; their lines.
inline std::vector<std::string> expect_all_done(std::vector<std::unique_ptr<child>>& procs,
                                                std::chrono::seconds limit = std::chrono::seconds(120))
{
    std::vector<std::string> lines;
    for (auto& p : procs)
        lines.push_back(expect_done(*p, limit));
    return lines;
}

/// `processes` count workers on NAME at WHERE, with their files in `dir`, run to their end,
/// then check_count_log()'s checks; returns what it read.
inline count_log run_count_workers(const std::string& where, const std::string& name, int processes, int coroutines,
                                   int sections, const std::string& dir,
                                   std::chrono::seconds limit = std::chrono::seconds(120))
{
    const std::string counter = dir + "/counter", log = dir + "/log";
    std::vector<std::unique_ptr<child>> workers;
    for (int p = 0; p < processes; ++p)
        workers.push_back(std::make_unique<child>(count_worker(where, name, coroutines, sections, counter, log)));
    expect_all_done(workers, limit);
    return check_count_log(counter, log, processes, processes * coroutines * sections);
}

}  // namespace dlock::test
