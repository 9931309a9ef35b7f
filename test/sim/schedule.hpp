// SPDX-License-Identifier: BSL-1.0
// One schedule: a seed decides the processes' clocks, every fault and every choice of the
// workload; run_schedule plays it and says what the checks found.
#pragma once

#include "process.hpp"
#include "redis_model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::sim {

/// A deliberately broken recipe the checks must catch (empty name: the real one).
struct broken_recipe {
    std::string name, what;
    std::string store = "redis";  ///< the store model it is run on
    redis_faults server{};
    bool no_drift_margin = false;
    bool setnx_then_expire = false;
    bool keepalive_from_reply = false;  ///< etcd, ZooKeeper: the session dated from a reply's arrival
    bool release_once = false;          ///< etcd: a release whose reply was lost is not asked again
    bool fence_before_row = false;      ///< PostgreSQL, MariaDB: the acquire draws its fence before the row
    bool node_loses_data = false;       ///< Redlock, memcached: a restart loses the data
    bool evicts = false;                ///< memcached: its "restarts" are evictions of the lock item
    bool writer_as_reader = false;      ///< read-write lock: a writer's acquire asks for a read lease
    bool extra_permit = false;          ///< semaphore: the server counts one permit more than it has
};

/// The stores the simulator models: redis (redis_store, with its direct hand-off),
/// redis-nohandoff (waiters woken by releases, as with wait_replicas), redis-rw and
/// redis-semaphore (a read-write lock and a semaphore of 2 on redis_store), redlock (3 nodes), etcd,
/// zookeeper, postgresql, mariadb and memcached.
const std::vector<std::string>& store_models();
const std::vector<broken_recipe>& broken_recipes();

/// One fault of a schedule's plan, drawn from the seed before the schedule runs (so that a
/// plan with faults left out is still the same schedule otherwise, as far as it can be).
struct fault_event {
    enum class kind {
        pause,
        crash,
        partition,
        stall,
        drop,
        restart
    } what;
    real_time at;
    int process = 0;
    real_time length{0};  ///< pause, partition, stall: how long; crash: until the restart; restart: downtime
    std::string describe() const;
};
/// How many processes a schedule on `store` runs: 3, or 4 for a read-write lock (two
/// writers, two readers) and a semaphore of 2 permits (four lanes).
int processes_of(const std::string& store);
/// The faults of `seed`'s schedule: one every 50 to 400 ms of its first 8 s.
std::vector<fault_event> fault_plan(std::uint64_t seed, int processes = 3);

struct schedule_result {
    bool ok = true;
    std::string violation;
    std::vector<std::string> trace;
    fault_counts faults;
    std::uint64_t grants = 0, writes = 0;
};

/// Plays the schedule of `seed` on the model of `store`: processes_of(store) processes of 2 workers, faults for
/// 8 s of simulated time, then a drain in which every waiter must be served and nothing left.
/// `plan`: the faults to inject (default: fault_plan(seed)).
schedule_result run_schedule(const std::string& store, std::uint64_t seed, const broken_recipe& recipe,
                             const std::vector<fault_event>* plan = nullptr, bool verbose = false);
/// The fewest of `seed`'s faults (a subset of its plan) with which the schedule still
/// fails: each fault is left out in turn and stays out if the schedule still fails.
std::vector<fault_event> minimize(const std::string& store, std::uint64_t seed, const broken_recipe& recipe);

}  // namespace dlock::sim
