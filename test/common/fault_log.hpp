// SPDX-License-Identifier: BSL-1.0
// What the fault workers leave behind, and the two promises checked on it: no two holders
// inside at once, and fencing tokens that rise in the order the lock was granted.
//
// Each worker appends, with one write() per line on an O_APPEND file:
//   B PID TOKEN T       after acquire returned (T: CLOCK_MONOTONIC ns, read after the grant)
//   E PID TOKEN T OK    before release (T read first, then OK = 1 if the guard was not lost)
// Only sections that ended with OK = 1 are judged: the holder still believed it held the
// lock at T_end, so it believed so throughout [T_begin, T_end]. A paused or cut-off holder
// whose lease ran out says OK = 0 (is_lost() is true as soon as its lease's local end has
// passed) and is the case fencing exists for; a killed one writes no E line.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace dlock::test {

struct fault_section {
    std::string pid;
    std::uint64_t token = 0;
    std::int64_t begin_ns = 0, end_ns = 0;
    bool ended = false, valid = false;
};

struct fault_report {
    std::size_t sections = 0;    ///< B lines
    std::size_t valid = 0;       ///< ended with the lock still held
    std::size_t lost = 0;        ///< ended after the lease had run out
    std::size_t unfinished = 0;  ///< no E line (the worker was killed)
    std::size_t malformed = 0;   ///< lines that are neither, or an E without its B
    std::vector<std::string> overlaps;  ///< two valid sections of two processes at once
    std::vector<std::string> order;     ///< a later grant with a token not above the earlier one's
    std::vector<fault_section> judged;  ///< the valid sections, in grant order
    /// Valid sections that began at or after `t_ns` (progress once the faults have healed).
    std::size_t valid_since(std::int64_t t_ns) const
    {
        return static_cast<std::size_t>(
            std::count_if(judged.begin(), judged.end(), [&](const fault_section& s) { return s.begin_ns >= t_ns; }));
    }
};

inline std::string describe(const fault_section& s)
{
    std::ostringstream o;
    o << "pid " << s.pid << " token " << s.token << " [" << s.begin_ns << ", " << s.end_ns << "]";
    return o.str();
}

/// Judges the lines of a fault log (see the top of this file).
inline fault_report judge_fault_log(std::istream& in)
{
    fault_report r;
    std::vector<fault_section> all;
    std::map<std::string, std::size_t> open;  // pid -> index of its section without an E yet
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream l(line);
        std::string phase, pid;
        fault_section s;
        std::int64_t t = 0;
        if (!(l >> phase >> pid >> s.token >> t)) {
            r.malformed += !line.empty();
            continue;
        }
        if (phase == "B") {
            if (auto it = open.find(pid); it != open.end())
                ++r.malformed;  // a B without an E before it: that worker died mid-section
            s.pid = pid;
            s.begin_ns = t;
            open[pid] = all.size();
            all.push_back(s);
            ++r.sections;
            continue;
        }
        int ok = 0;
        auto it = open.find(pid);
        if (phase != "E" || !(l >> ok) || it == open.end() || all[it->second].token != s.token) {
            ++r.malformed;
            continue;
        }
        auto& b = all[it->second];
        b.ended = true;
        b.end_ns = t;
        b.valid = ok == 1;
        open.erase(it);
    }
    for (auto& s : all) {
        r.valid += s.ended && s.valid;
        r.lost += s.ended && !s.valid;
        r.unfinished += !s.ended;
        if (s.ended && s.valid)
            r.judged.push_back(s);
    }
    std::stable_sort(r.judged.begin(), r.judged.end(),
                     [](const fault_section& a, const fault_section& b) { return a.begin_ns < b.begin_ns; });
    // Overlap: a section that begins before the latest end so far, of another process.
    const fault_section* reach = nullptr;  // the judged section ending last so far
    for (std::size_t i = 0; i < r.judged.size(); ++i) {
        const auto& s = r.judged[i];
        if (reach && s.begin_ns < reach->end_ns && s.pid != reach->pid)
            r.overlaps.push_back(describe(*reach) + " and " + describe(s));
        if (i > 0) {
            const auto& p = r.judged[i - 1];
            bool rises = p.pid == s.pid ? s.token >= p.token : s.token > p.token;
            if (!rises)
                r.order.push_back(describe(p) + " then " + describe(s));
        }
        if (!reach || s.end_ns > reach->end_ns)
            reach = &s;
    }
    return r;
}

inline fault_report judge_fault_log(const std::string& path)
{
    std::ifstream in(path);
    return judge_fault_log(in);
}

}  // namespace dlock::test
