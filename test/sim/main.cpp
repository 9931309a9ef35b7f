// SPDX-License-Identifier: BSL-1.0
// dlock_sim: the real lock machine against a model of its store, under seeded faults, many
// schedules (docs/simulation.md). Exits 1 on a violation (printing its seed, trace and the
// command that replays it), or with --expect-caught, 1 if no schedule caught the broken recipe.
#include "schedule.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

using namespace dlock::sim;

namespace {

int usage(int status)
{
    std::printf("usage: dlock_sim [--store redis|redis-nohandoff|etcd|zookeeper|postgresql|mariadb|all]\n"
                "                 [--seeds N] [--first S] [--seconds N] [--seed S] [--broken NAME [--expect-caught]] "
                "[--list-broken] [--trace] [--json]\n"
                "  --seeds N         schedules per store (default 200): seeds S, S+1, ... from --first (1)\n"
                "  --seconds N       instead, run each store for N seconds of wall time (a long run)\n"
                "  --hours N         the same in hours (before a release)\n"
                "  --seed S          replay one schedule of --store (default redis) and print its trace\n"
                "                    (--verbose: every action of the lock machines too)\n"
                "  --broken NAME     run a deliberately broken recipe (--list-broken lists them)\n"
                "  --expect-caught   with --broken: succeed only if some schedule catches it\n"
                "  --minimize        on a failure, the fewest of its faults that still fail (always for the\n"
                "                    real recipe)\n");
    return status;
}

bool number(const char* s, std::uint64_t& out)
{
    char* end = nullptr;
    out = std::strtoull(s, &end, 10);
    return end && *end == '\0' && *s != '\0';
}

struct options {
    std::vector<std::string> stores{"all"};
    std::string broken;
    std::uint64_t seeds = 200, first = 1, seconds = 0;
    std::optional<std::uint64_t> one;
    bool json = false, trace = false, expect_caught = false, minimize = false, verbose = false;
};

struct store_report {
    std::uint64_t schedules = 0, grants = 0, writes = 0;
    fault_counts faults;
    double seconds = 0;
    std::optional<std::uint64_t> failing;
    schedule_result failed;
};

store_report run_store(const std::string& store, const options& o, const broken_recipe& recipe)
{
    store_report rep;
    auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    for (std::uint64_t s = o.first; o.seconds ? elapsed() < double(o.seconds) : rep.schedules < o.seeds; ++s) {
        auto r = run_schedule(store, s, recipe);
        ++rep.schedules;
        rep.grants += r.grants;
        rep.writes += r.writes;
        auto& f = rep.faults;
        f.lost_replies += r.faults.lost_replies;
        f.drops += r.faults.drops;
        f.partitions += r.faults.partitions;
        f.stalls += r.faults.stalls;
        f.pauses += r.faults.pauses;
        f.crashes += r.faults.crashes;
        f.restarts += r.faults.restarts;
        f.cancels += r.faults.cancels;
        if (!r.ok) {
            rep.failing = s;
            rep.failed = std::move(r);
            break;
        }
    }
    rep.seconds = elapsed();
    return rep;
}

void print(const std::string& store, const options& o, const store_report& r)
{
    const auto& f = r.faults;
    auto label = store + (o.broken.empty() ? "" : " [" + o.broken + "]");
    if (o.json) {
        boost::json::object faults{{"lost_replies", f.lost_replies},
                                   {"drops", f.drops},
                                   {"partitions", f.partitions},
                                   {"stalls", f.stalls},
                                   {"pauses", f.pauses},
                                   {"crashes", f.crashes},
                                   {"restarts", f.restarts},
                                   {"cancels", f.cancels}};
        boost::json::object j{{"store", store},
                              {"broken", o.broken},
                              {"schedules", r.schedules},
                              {"violations", r.failing ? 1 : 0},
                              {"grants", r.grants},
                              {"writes", r.writes},
                              {"faults", faults},
                              {"seconds", r.seconds},
                              {"schedules_per_s", double(r.schedules) / std::max(r.seconds, 1e-9)}};
        if (r.failing)
            j["seed"] = *r.failing;
        std::printf("%s\n", boost::json::serialize(j).c_str());
    } else {
        std::printf(
            "%s: %llu schedules in %.1f s (%.0f/s), %llu grants, %llu writes; faults: %llu lost replies, "
            "%llu drops, %llu partitions, %llu stalls, %llu pauses, %llu crashes, %llu server restarts, %llu cancels\n",
            label.c_str(), (unsigned long long)r.schedules, r.seconds, double(r.schedules) / std::max(r.seconds, 1e-9),
            (unsigned long long)r.grants, (unsigned long long)r.writes, (unsigned long long)f.lost_replies,
            (unsigned long long)f.drops, (unsigned long long)f.partitions, (unsigned long long)f.stalls,
            (unsigned long long)f.pauses, (unsigned long long)f.crashes, (unsigned long long)f.restarts,
            (unsigned long long)f.cancels);
    }
    if (!r.failing)
        return;
    std::printf("%s seed %llu: %s\n", store.c_str(), (unsigned long long)*r.failing, r.failed.violation.c_str());
    if (o.trace || o.broken.empty()) {
        auto& t = r.failed.trace;
        for (std::size_t i = t.size() > 40 ? t.size() - 40 : 0; i < t.size(); ++i)
            std::printf("  %s\n", t[i].c_str());
        std::printf("replay: dlock_sim --store %s%s --seed %llu\n", store.c_str(),
                    o.broken.empty() ? "" : (" --broken " + o.broken).c_str(), (unsigned long long)*r.failing);
    }
    if (o.minimize || o.broken.empty()) {
        broken_recipe recipe;
        for (auto& b : broken_recipes())
            if (b.name == o.broken)
                recipe = b;
        auto all = fault_plan(*r.failing, processes_of(store));
        auto fewest = minimize(store, *r.failing, recipe);
        std::printf("minimized: %zu of the schedule's %zu faults still fail it:\n", fewest.size(), all.size());
        for (auto& f : fewest)
            std::printf("  %s\n", f.describe().c_str());
    }
}

}  // namespace

int main(int argc, char** argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](std::uint64_t& out) { return i + 1 < argc && number(argv[++i], out); };
        std::uint64_t v = 0;
        if (a == "--store" && i + 1 < argc)
            o.stores = {argv[++i]};
        else if (a == "--seeds" && value(o.seeds))
            ;
        else if (a == "--first" && value(o.first))
            ;
        else if (a == "--seconds" && value(o.seconds))
            ;
        else if (a == "--hours" && value(v))
            o.seconds = v * 3600;
        else if (a == "--seed" && value(v))
            o.one = v;
        else if (a == "--broken" && i + 1 < argc)
            o.broken = argv[++i];
        else if (a == "--expect-caught")
            o.expect_caught = true;
        else if (a == "--verbose")
            o.verbose = true;
        else if (a == "--minimize")
            o.minimize = true;
        else if (a == "--trace")
            o.trace = true;
        else if (a == "--json")
            o.json = true;
        else if (a == "--list-broken") {
            for (auto& b : broken_recipes())
                std::printf("%-30s %s\n", b.name.c_str(), b.what.c_str());
            return 0;
        } else
            return usage(a == "--help" ? 0 : 2);
    }
    const auto& models = store_models();
    if (o.stores[0] == "all")
        o.stores = o.one ? std::vector<std::string>{"redis"} : models;
    else if (std::find(models.begin(), models.end(), o.stores[0]) == models.end()) {
        std::fprintf(stderr, "dlock_sim: no model of '%s' (see --help)\n", o.stores[0].c_str());
        return 2;
    }
    broken_recipe recipe;
    if (!o.broken.empty()) {
        auto it = std::find_if(broken_recipes().begin(), broken_recipes().end(),
                               [&](const broken_recipe& b) { return b.name == o.broken; });
        if (it == broken_recipes().end()) {
            std::fprintf(stderr, "dlock_sim: no broken recipe '%s' (see --list-broken)\n", o.broken.c_str());
            return 2;
        }
        recipe = *it;
        if (o.stores.size() > 1 || o.stores[0] != recipe.store)
            o.stores = {recipe.store};  // a broken recipe runs on the store it breaks
    }
    if (o.one) {
        auto r = run_schedule(o.stores[0], *o.one, recipe, nullptr, o.verbose);
        for (auto& line : r.trace)
            std::printf("%s\n", line.c_str());
        std::printf("%s seed %llu: %s\n", o.stores[0].c_str(), (unsigned long long)*o.one,
                    r.ok ? "ok" : r.violation.c_str());
        return r.ok ? 0 : 1;
    }
    bool any_failed = false;
    for (auto& store : o.stores) {
        auto r = run_store(store, o, recipe);
        print(store, o, r);
        any_failed = any_failed || r.failing.has_value();
    }
    if (o.expect_caught)
        return any_failed ? 0 : 1;
    return any_failed ? 1 : 0;
}
