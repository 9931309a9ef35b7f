// SPDX-License-Identifier: BSL-1.0
// What the lock_worker "sections" processes leave behind: "B|E KIND pid token" lines in the
// order sections began and ended, replayed to check who was inside at once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dlock::test {

struct sections_log {
    std::size_t begins = 0, ends = 0;
    bool writer_alone = true;       ///< no section overlapped a writer's
    bool well_formed = true;        ///< every E closed an open B of the same token
    std::size_t max_inside = 0;     ///< most sections inside at once
    std::size_t max_readers = 0;    ///< most readers inside at once
    std::size_t max_reader_pids = 0;  ///< most processes with a reader inside at once
    bool writer_tokens_rise = true;  ///< in file order, writers' tokens never go down
    bool tokens_unique = true;       ///< permits: no token began twice while inside
    std::size_t last_writer_line = 0;  ///< the line of the last "E w" (0: none)
    std::size_t reader_begins_after_last_writer = 0;
};

inline sections_log read_sections_log(const std::string& path)
{
    sections_log r;
    std::ifstream in(path);
    std::string phase, kind, pid;
    std::uint64_t token = 0, last_writer = 0;
    std::multiset<std::uint64_t> inside;
    std::map<std::string, int> reader_pids;
    std::size_t readers = 0, writers = 0, line = 0;
    while (in >> phase >> kind >> pid >> token) {
        ++line;
        if (phase == "B") {
            ++r.begins;
            if (kind == "p" && inside.count(token))
                r.tokens_unique = false;
            inside.insert(token);
            if (kind == "w") {
                r.writer_alone = r.writer_alone && inside.size() == 1;
                // Local hand-offs share a lease, and its token: never lower, equal within one.
                r.writer_tokens_rise = r.writer_tokens_rise && token >= last_writer;
                last_writer = token;
                ++writers;
            } else {
                r.writer_alone = r.writer_alone && writers == 0;
                if (kind == "r") {
                    ++readers;
                    ++reader_pids[pid];
                    if (r.last_writer_line)
                        ++r.reader_begins_after_last_writer;
                }
            }
            r.max_inside = std::max(r.max_inside, inside.size());
            r.max_readers = std::max(r.max_readers, readers);
            r.max_reader_pids = std::max(
                r.max_reader_pids,
                static_cast<std::size_t>(std::count_if(reader_pids.begin(), reader_pids.end(), [](auto& e) { return e.second > 0; })));
        } else {
            ++r.ends;
            auto it = inside.find(token);
            if (it == inside.end())
                r.well_formed = false;
            else
                inside.erase(it);
            if (kind == "w") {
                --writers;
                r.last_writer_line = line;
                r.reader_begins_after_last_writer = 0;
            } else if (kind == "r") {
                --readers;
                --reader_pids[pid];
            }
        }
    }
    return r;
}

}  // namespace dlock::test
