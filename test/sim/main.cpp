// SPDX-License-Identifier: BSL-1.0
// dlock_sim: the real lock machine against a model of its store, under seeded faults, many
// schedules (docs/simulation.md). Exits 1 on a violation (printing its seed and trace), or
// with --expect-caught, 1 if no schedule caught the broken recipe.
#include "schedule.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

using namespace dlock::sim;

namespace {

int usage(int status)
{
    std::printf("usage: dlock_sim [--store redis|all] [--seeds N] [--first S] [--seed S] [--seconds N]\n"
                "                 [--broken NAME [--expect-caught]] [--list-broken] [--trace] [--json]\n"
                "  --seeds N         schedules to run (default 200), seeds S, S+1, ... from --first (1)\n"
                "  --seconds N       stop after N seconds of wall time instead (a long run)\n"
                "  --seed S          replay one schedule and print its trace\n"
                "  --broken NAME     run a deliberately broken recipe (--list-broken lists them)\n"
                "  --expect-caught   with --broken: succeed only if some schedule catches it\n");
    return status;
}

bool number(const char* s, std::uint64_t& out)
{
    char* end = nullptr;
    out = std::strtoull(s, &end, 10);
    return end && *end == '\0' && *s != '\0';
}

}  // namespace

int main(int argc, char** argv)
{
    std::string store = "redis", broken;
    std::uint64_t seeds = 200, first = 1, seconds = 0;
    std::optional<std::uint64_t> one;
    bool json = false, trace = false, expect_caught = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](std::uint64_t& out) { return i + 1 < argc && number(argv[++i], out); };
        std::uint64_t v = 0;
        if (a == "--store" && i + 1 < argc)
            store = argv[++i];
        else if (a == "--seeds" && value(seeds))
            ;
        else if (a == "--first" && value(first))
            ;
        else if (a == "--seconds" && value(seconds))
            ;
        else if (a == "--seed" && value(v))
            one = v;
        else if (a == "--broken" && i + 1 < argc)
            broken = argv[++i];
        else if (a == "--expect-caught")
            expect_caught = true;
        else if (a == "--trace")
            trace = true;
        else if (a == "--json")
            json = true;
        else if (a == "--list-broken") {
            for (auto& b : broken_recipes())
                std::printf("%-30s %s\n", b.name.c_str(), b.what.c_str());
            return 0;
        } else
            return usage(a == "--help" ? 0 : 2);
    }
    if (store != "redis" && store != "all") {
        std::fprintf(stderr, "dlock_sim: no model of '%s' yet (models: redis)\n", store.c_str());
        return 2;
    }
    broken_recipe recipe;
    if (!broken.empty()) {
        bool found = false;
        for (auto& b : broken_recipes())
            if (b.name == broken) {
                recipe = b;
                found = true;
            }
        if (!found) {
            std::fprintf(stderr, "dlock_sim: no broken recipe '%s' (see --list-broken)\n", broken.c_str());
            return 2;
        }
    }
    if (one) {
        auto r = run_schedule(*one, recipe);
        for (auto& line : r.trace)
            std::printf("%s\n", line.c_str());
        std::printf("seed %llu: %s\n", static_cast<unsigned long long>(*one), r.ok ? "ok" : r.violation.c_str());
        return r.ok ? 0 : 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    std::uint64_t run = 0, violations = 0, grants = 0, writes = 0;
    fault_counts total;
    std::optional<std::uint64_t> failing;
    schedule_result failed;
    for (std::uint64_t s = first; seconds ? elapsed() < double(seconds) : run < seeds; ++s) {
        auto r = run_schedule(s, recipe);
        ++run;
        grants += r.grants;
        writes += r.writes;
        total.lost_replies += r.faults.lost_replies;
        total.drops += r.faults.drops;
        total.partitions += r.faults.partitions;
        total.pauses += r.faults.pauses;
        total.crashes += r.faults.crashes;
        total.restarts += r.faults.restarts;
        total.cancels += r.faults.cancels;
        if (!r.ok) {
            ++violations;
            if (!failing) {
                failing = s;
                failed = r;
            }
            if (expect_caught || broken.empty())
                break;
        }
    }
    double secs = elapsed();
    if (json) {
        boost::json::object f{{"lost_replies", total.lost_replies},
                              {"drops", total.drops},
                              {"partitions", total.partitions},
                              {"pauses", total.pauses},
                              {"crashes", total.crashes},
                              {"restarts", total.restarts},
                              {"cancels", total.cancels}};
        boost::json::object o{{"store", "redis"},
                              {"broken", broken},
                              {"schedules", run},
                              {"violations", violations},
                              {"grants", grants},
                              {"writes", writes},
                              {"faults", f},
                              {"seconds", secs},
                              {"schedules_per_s", double(run) / secs}};
        if (failing)
            o["seed"] = *failing;
        std::printf("%s\n", boost::json::serialize(o).c_str());
    } else {
        std::printf("redis%s: %llu schedules in %.1f s (%.0f/s), %llu grants, %llu writes; faults: %llu lost replies, "
                    "%llu drops, %llu partitions, %llu pauses, %llu crashes, %llu server restarts, %llu cancels\n",
                    broken.empty() ? "" : (" [" + broken + "]").c_str(), static_cast<unsigned long long>(run), secs,
                    double(run) / secs, static_cast<unsigned long long>(grants),
                    static_cast<unsigned long long>(writes), static_cast<unsigned long long>(total.lost_replies),
                    static_cast<unsigned long long>(total.drops), static_cast<unsigned long long>(total.partitions),
                    static_cast<unsigned long long>(total.pauses), static_cast<unsigned long long>(total.crashes),
                    static_cast<unsigned long long>(total.restarts), static_cast<unsigned long long>(total.cancels));
    }
    if (failing) {
        std::printf("seed %llu: %s\n", static_cast<unsigned long long>(*failing), failed.violation.c_str());
        if (trace || broken.empty()) {
            auto& t = failed.trace;
            std::size_t from = t.size() > 40 ? t.size() - 40 : 0;
            for (std::size_t i = from; i < t.size(); ++i)
                std::printf("  %s\n", t[i].c_str());
            std::printf("replay: dlock_sim%s --seed %llu\n", broken.empty() ? "" : (" --broken " + broken).c_str(),
                        static_cast<unsigned long long>(*failing));
        }
    }
    if (expect_caught)
        return failing ? 0 : 1;
    return failing ? 1 : 0;
}
