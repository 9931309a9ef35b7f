// SPDX-License-Identifier: BSL-1.0
// A fault run: worker processes (fault_worker.cpp) take one lock over and over while the test
// injects faults (holders paused past their lease and killed, servers restarted, members
// killed and paused, connections stalled and dropped), then a quiet tail; the workers' log is
// judged (test/common/fault_log.hpp): no two holders inside at once, tokens rising in grant
// order, and progress once the faults have healed.
//
// Bounded: DLOCK_FAULT_SECONDS (default 20) of faults, then the tail. The schedule comes
// from DLOCK_FAULT_SEED (default 1), printed so a failing run can be replayed; longer soaks
// run with a larger DLOCK_FAULT_SECONDS.
#pragma once

#include "common/child.hpp"
#include "common/fault_log.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

/// One kind of fault: `inject` causes it and heals it before returning.
struct fault {
    std::string name;
    std::function<void()> inject;
};

class fault_run {
public:
    /// One worker per entry of `tool_options` (the dlock tool's options naming its store).
    fault_run(std::string name, std::chrono::milliseconds lease, std::chrono::milliseconds hold,
              std::vector<std::vector<std::string>> tool_options)
        : name_(std::move(name)), lease_(lease), hold_(hold), options_(std::move(tool_options))
    {
        dir_ = std::filesystem::temp_directory_path() / ("dlock-faults-" + std::to_string(::getpid()) + "-" + name_);
        std::filesystem::create_directories(dir_);
        log_ = (dir_ / "sections.log").string();
        if (const char* s = std::getenv("DLOCK_FAULT_SECONDS"))
            chaos_ = std::chrono::seconds(std::atoi(s));
        if (const char* s = std::getenv("DLOCK_FAULT_SEED"))
            seed_ = static_cast<unsigned>(std::strtoul(s, nullptr, 10));
        end_ = std::chrono::steady_clock::now() + chaos_ + tail_;
        for (std::size_t i = 0; i < options_.size(); ++i)
            workers_.push_back(spawn(i));
    }
    ~fault_run()
    {
        workers_.clear();  // SIGKILL whatever is left
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    /// What the store holds, printed when progress stalled (keys, nodes, rows of the lock).
    std::function<std::string()> describe_stall;

    std::size_t workers() const noexcept { return workers_.size(); }
    std::chrono::milliseconds lease() const noexcept { return lease_; }
    std::mt19937& rng() noexcept { return rng_; }

    /// SIGSTOP worker i for `d`, then SIGCONT: a holder paused past its lease.
    void pause_worker(std::size_t i, std::chrono::milliseconds d)
    {
        workers_.at(i)->signal(SIGSTOP);
        std::this_thread::sleep_for(d);  // the fault's length, not a wait for anything
        workers_.at(i)->signal(SIGCONT);
    }
    /// SIGKILL worker i and start another in its place (a crashed holder or waiter).
    void kill_worker(std::size_t i)
    {
        workers_.at(i)->signal(SIGKILL);
        workers_.at(i)->wait(std::chrono::seconds(10));
        ++killed_;
        workers_.at(i) = spawn(i);
    }
    /// The faults every store gets: a worker paused for 1.5 leases, a worker killed.
    std::vector<fault> worker_faults()
    {
        return {
            {"pause a worker", [this] { pause_worker(pick(), lease_ + lease_ / 2); }},
            {"kill a worker", [this] { kill_worker(pick()); }},
        };
    }
    std::size_t pick() { return std::uniform_int_distribution<std::size_t>(0, workers_.size() - 1)(rng_); }

    /// Injects faults drawn from `faults` (with quiet gaps between them) until the fault
    /// period ends, then lets the workers finish and judges their log.
    fault_report run(const std::vector<fault>& faults)
    {
        BOOST_TEST_MESSAGE(name_ << ": " << chaos_.count() << " s of faults, seed " << seed_
                                 << " (DLOCK_FAULT_SEED, DLOCK_FAULT_SECONDS)");
        rng_.seed(seed_);
        auto chaos_end = end_ - tail_;
        std::vector<std::size_t> injected(faults.size());
        while (std::chrono::steady_clock::now() < chaos_end) {
            std::this_thread::sleep_for(std::chrono::milliseconds(
                std::uniform_int_distribution<int>(200, 1200)(rng_)));  // a quiet gap
            auto f = std::uniform_int_distribution<std::size_t>(0, faults.size() - 1)(rng_);
            BOOST_TEST_MESSAGE(name_ << ": " << faults[f].name);
            auto began = std::chrono::steady_clock::now();
            faults[f].inject();
            history_.push_back({faults[f].name, began, std::chrono::steady_clock::now()});
            ++injected[f];
        }
        healed_ = std::chrono::steady_clock::now();
        for (std::size_t f = 0; f < faults.size(); ++f)
            BOOST_TEST_MESSAGE(name_ << ": " << faults[f].name << " x" << injected[f]);
        for (auto& w : workers_) {
            auto line = w->read_line(tail_ + std::chrono::seconds(60));
            BOOST_TEST_MESSAGE(name_ << " worker: " << line.value_or("<none>"));
            BOOST_TEST((line && line->rfind("done", 0) == 0), name_ << ": a worker did not finish");
            BOOST_TEST(w->wait(std::chrono::seconds(30)) == 0);
        }
        auto r = judge_fault_log(log_);
        BOOST_TEST_MESSAGE(name_ << ": " << r.sections << " sections, " << r.valid << " held to the end, " << r.lost
                                 << " lost, " << r.unfinished << " cut by a kill; " << killed_ << " workers killed");
        BOOST_TEST(r.overlaps.empty(), name_ << ": two holders at once: "
                                             << (r.overlaps.empty() ? "" : r.overlaps.front()) << " (" << r.overlaps.size()
                                             << " in all)");
        BOOST_TEST(r.order.empty(), name_ << ": fencing token out of grant order: "
                                          << (r.order.empty() ? "" : r.order.front()) << " (" << r.order.size()
                                          << " in all)");
        BOOST_TEST(r.malformed == 0u, name_ << ": " << r.malformed << " malformed lines");
        auto healed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(healed_.time_since_epoch()).count();
        BOOST_TEST(r.valid_since(healed_ns) >= 3u, name_ << ": no progress in the " << tail_.count()
                                                         << " s after the last fault healed");
        if (r.valid_since(healed_ns) < 3u) {
            print_log_tail(healed_ns);
            if (describe_stall)
                BOOST_TEST_MESSAGE(name_ << " store: " << describe_stall());
        }
        return r;
    }

private:
    /// The log's last 15 s, times in ms from the last fault's healing: what a stuck tail did.
    void print_log_tail(std::int64_t healed_ns) const
    {
        auto ms = [&](std::chrono::steady_clock::time_point t) {
            return (std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() - healed_ns) /
                   1'000'000;
        };
        for (const auto& h : history_)
            BOOST_TEST_MESSAGE(name_ << " fault: " << h.name << " from " << ms(h.began) << " ms to " << ms(h.healed)
                                     << " ms");
        std::ifstream in(log_);
        for (std::string line; std::getline(in, line);) {
            std::istringstream f(line);
            std::string kind, pid, token;
            std::int64_t t = 0;
            if ((f >> kind >> pid >> token >> t) && t >= healed_ns - 15'000'000'000)
                BOOST_TEST_MESSAGE(name_ << " log: " << kind << " pid " << pid << " token " << token << " at "
                                         << (t - healed_ns) / 1'000'000 << " ms");
        }
    }

    std::unique_ptr<child> spawn(std::size_t i)
    {
        auto end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end_.time_since_epoch()).count();
        std::vector<std::string> argv{DLOCK_FAULT_WORKER_PATH, std::to_string(end_ns), std::to_string(lease_.count()),
                                      std::to_string(hold_.count()), log_, "faults-" + name_};
        argv.insert(argv.end(), options_.at(i).begin(), options_.at(i).end());
        return std::make_unique<child>(argv);
    }

    std::string name_;
    std::chrono::milliseconds lease_, hold_;
    std::vector<std::vector<std::string>> options_;
    std::filesystem::path dir_;
    std::string log_;
    std::chrono::seconds chaos_{20}, tail_{8};
    unsigned seed_ = 1;
    std::mt19937 rng_;
    std::chrono::steady_clock::time_point end_, healed_;
    std::vector<std::unique_ptr<child>> workers_;
    std::size_t killed_ = 0;
    struct injected {
        std::string name;
        std::chrono::steady_clock::time_point began, healed;
    };
    std::vector<injected> history_;
};

}  // namespace dlock::test
