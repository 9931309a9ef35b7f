// SPDX-License-Identifier: BSL-1.0
#include "schedule.hpp"

#include "etcd_recipe.hpp"
#include "memcached_recipe.hpp"
#if DLOCK_SIM_MARIADB
#include "maria_recipe.hpp"
#endif
#include "pg_recipe.hpp"
#include "redis_recipe.hpp"
#include "redlock_recipe.hpp"
#include "zk_recipe.hpp"

#include <memory>

namespace dlock::sim {

const std::vector<broken_recipe>& broken_recipes()
{
    static const std::vector<broken_recipe> all = [] {
        std::vector<broken_recipe> v;
        v.push_back({"no_drift_margin", "the machine takes no margin off its lease for clock drift"});
        v.back().no_drift_margin = true;
        v.push_back({"release_without_owner_check", "the release deletes the lock whoever holds it"});
        v.back().server.release_without_owner_check = true;
        v.push_back({"setnx_then_expire", "SETNX, then EXPIRE in a second request"});
        v.back().server.setnx_then_expire = true;
        v.back().setnx_then_expire = true;
        v.push_back({"counter_not_durable", "a server restart loses the fencing counter"});
        v.back().server.counter_not_durable = true;
        v.push_back({"handoff_reuses_fence", "a direct hand-off gives the waiter the holder's fencing token"});
        v.back().server.handoff_reuses_fence = true;
        v.push_back({"keepalive_from_reply", "etcd: a keep-alive moves the session's deadline from its reply"});
        v.back().store = "etcd";
        v.back().keepalive_from_reply = true;
        v.push_back({"etcd_release_once", "etcd: a release whose reply was lost is not asked again"});
        v.back().store = "etcd";
        v.back().release_once = true;
        v.push_back({"zk_session_from_reply", "ZooKeeper: an answer dates the session from its arrival, not its send"});
        v.back().store = "zookeeper";
        v.back().keepalive_from_reply = true;
        v.push_back({"pg_fence_before_row",
                     "PostgreSQL: the acquire draws its fence when the statement starts, before the name's turn"});
        v.back().store = "postgresql";
        v.back().fence_before_row = true;
        v.push_back({"redlock_restart_loses_data",
                     "Redlock: a node restarts at once without its data (no AOF, no delayed restart)"});
        v.back().store = "redlock";
        v.back().node_loses_data = true;
        v.push_back({"memcached_restart_loses_items", "memcached: a server restart loses every item (the lock too)"});
        v.back().store = "memcached";
        v.back().node_loses_data = true;
        v.push_back({"memcached_evicts", "memcached: memory pressure evicts the lock item"});
        v.back().store = "memcached";
        v.back().evicts = true;
        v.push_back({"rw_writer_as_reader", "read-write lock: a writer's acquire asks for a read lease"});
        v.back().store = "redis-rw";
        v.back().writer_as_reader = true;
        v.push_back({"semaphore_extra_permit", "semaphore: the server counts one permit more than it has"});
        v.back().store = "redis-semaphore";
        v.back().extra_permit = true;
#if DLOCK_SIM_MARIADB
        v.push_back({"maria_fence_before_row",
                     "MariaDB: the acquire draws its fence in VALUES, before it waits for the name's row"});
        v.back().store = "mariadb";
        v.back().fence_before_row = true;
#endif
        return v;
    }();
    return all;
}

const std::vector<std::string>& store_models()
{
    static const std::vector<std::string> all = [] {
        std::vector<std::string> v{"redis", "redis-nohandoff", "redis-rw",   "redis-semaphore", "redlock",
                                   "etcd",  "zookeeper",       "postgresql", "memcached"};
#if DLOCK_SIM_MARIADB
        v.push_back("mariadb");
#endif
        return v;
    }();
    return all;
}

std::string fault_event::describe() const
{
    static const char* names[] = {"pause", "crash", "partition", "reply stall", "drop connection", "server restart"};
    auto ms = [](real_time t) { return std::to_string(std::chrono::duration_cast<milliseconds>(t).count()); };
    std::string s = "at " + ms(at) + " ms: " + names[static_cast<int>(what)];
    if (what != kind::restart)
        s += " of p" + std::to_string(process);
    if (what != kind::drop)
        s += " for " + ms(length) + " ms";
    return s;
}

int processes_of(const std::string& store)
{
    return store == "redis-rw" || store == "redis-semaphore" ? 4 : 3;
}

std::vector<fault_event> fault_plan(std::uint64_t seed, int processes)
{
    world w(seed * 0x9E3779B97F4A7C15ULL + 1);  // a stream of its own
    std::vector<fault_event> plan;
    for (real_time t = w.ms(50, 400); t < milliseconds(8000); t += w.ms(50, 400)) {
        fault_event f{fault_event::kind::drop, t, static_cast<int>(w.uniform(0, processes - 1))};
        auto pick = w.unit();
        if (pick < 0.15)
            f = {fault_event::kind::pause, t, f.process, w.ms(100, 2500)};
        else if (pick < 0.25)
            f = {fault_event::kind::crash, t, f.process, w.ms(0, 500)};
        else if (pick < 0.40)
            f = {fault_event::kind::partition, t, f.process, w.ms(100, 1500)};
        else if (pick < 0.55)
            f = {fault_event::kind::drop, t, f.process};
        else if (pick < 0.60)
            f = {fault_event::kind::restart, t, 0, w.ms(10, 50)};
        else if (pick < 0.68)
            f = {fault_event::kind::stall, t, f.process, w.ms(100, 3000)};
        else
            continue;
        plan.push_back(f);
    }
    return plan;
}

std::vector<fault_event> minimize(const std::string& store, std::uint64_t seed, const broken_recipe& recipe)
{
    auto plan = fault_plan(seed, processes_of(store));
    for (std::size_t i = plan.size(); i-- > 0;) {
        auto fewer = plan;
        fewer.erase(fewer.begin() + static_cast<long>(i));
        if (!run_schedule(store, seed, recipe, &fewer).ok)
            plan = std::move(fewer);
    }
    return plan;
}

schedule_result run_schedule(const std::string& store, std::uint64_t seed, const broken_recipe& bad,
                             const std::vector<fault_event>* plan, bool verbose)
{
    const int processes = processes_of(store);
    const real_time fault_end = milliseconds(8000), bound = milliseconds(20000);
    world w(seed);
    w.verbose = verbose;
    const bool on_rw = store == "redis-rw", on_sem = store == "redis-semaphore";
    redis_model srv(bad.server, store == "redis" || on_rw || on_sem);
    etcd_model etcd(w);
    zk_model zk(w);
    pg_model pg;
    redlock_nodes rl{std::vector<redis_model>(3, redis_model(bad.server, false)), std::vector<real_time>(3)};
    const bool on_etcd = store == "etcd", on_zk = store == "zookeeper", on_pg = store == "postgresql",
               on_redlock = store == "redlock", on_mc = store == "memcached";
    // memcached's server clock ticks at its own phase of the second (drawn for it alone).
    memcached_model mc(on_mc ? w.ms(0, 999) : real_time(0));
#if DLOCK_SIM_MARIADB
    maria_model maria(w);
    const bool on_maria = store == "mariadb";
#else
    const bool on_maria = false;
#endif
    checks chk(w);
    fault_counts faults;
    sim_settings cfg;
    cfg.no_drift_margin = bad.no_drift_margin;
    if (on_mc)
        cfg.lease = milliseconds(2000);  // memcached's shortest: whole seconds, 2 s at least
    // A read-write lock: p0 and p3 write, p1 and p2 read. A semaphore of 2: four lanes.
    if (on_rw) {
        srv.serve_as_set(lease_kind::read, 0);
        cfg.kind_of = [](int id) { return id == 0 || id == 3 ? lease_kind::write : lease_kind::read; };
        cfg.writer_as_reader = bad.writer_as_reader;
    } else if (on_sem) {
        cfg.permits = 2;
        srv.serve_as_set(lease_kind::permit, cfg.permits + (bad.extra_permit ? 1 : 0));
        cfg.kind_of = [](int) { return lease_kind::permit; };
    }
    bool handoff = store == "redis" || on_rw || on_sem;
    shared_state shared{w,
                        [&](process& p) -> std::unique_ptr<recipe> {
                            if (on_pg)
                                return std::make_unique<pg_recipe>(p, pg, bad.fence_before_row);
                            if (on_redlock)
                                return std::make_unique<redlock_recipe>(p, rl);
                            if (on_mc)
                                return std::make_unique<memcached_recipe>(p, mc);
#if DLOCK_SIM_MARIADB
                            if (on_maria)
                                return std::make_unique<maria_recipe>(p, maria, bad.fence_before_row);
#endif
                            if (on_zk)
                                return std::make_unique<zk_recipe>(p, zk, bad.keepalive_from_reply);
                            if (on_etcd)
                                return std::make_unique<etcd_recipe>(p, etcd, bad.keepalive_from_reply,
                                                                     bad.release_once);
                            return std::make_unique<redis_recipe>(p, srv, handoff, bad.setnx_then_expire);
                        },
                        chk,
                        faults,
                        cfg,
                        {}};
    std::vector<std::unique_ptr<process>> ps;
    for (int i = 0; i < processes; ++i) {
        ps.push_back(std::make_unique<process>(shared, i));
        shared.processes.push_back(ps.back().get());
    }
    srv.on_publish = [&] {
        for (int conn : srv.subscribers())
            ps[static_cast<std::size_t>(conn % 10)]->push(
                conn, [](sim::recipe& r) { static_cast<redis_recipe&>(r).released(); });
    };
    srv.on_grant = [&](const std::string& token, std::uint64_t fence, milliseconds ttl) {
        for (int conn : srv.grant_subscribers(token))
            ps[static_cast<std::size_t>(conn % 10)]->push(conn, [token, fence, ttl](sim::recipe& r) {
                static_cast<redis_recipe&>(r).granted(token, fence, ttl);
            });
    };
    zk.on_deleted = [&](int conn, const std::string& name) {
        ps[static_cast<std::size_t>(conn % 10)]->push(
            conn, [name](sim::recipe& r) { static_cast<zk_recipe&>(r).deleted(name); });
    };
    for (std::size_t i = 0; i < rl.nodes.size(); ++i)
        rl.nodes[i].on_publish = [&, i] {
            for (int conn : rl.nodes[i].subscribers())
                ps[static_cast<std::size_t>(conn % 10)]->push(
                    conn, [i](sim::recipe& r) { static_cast<redlock_recipe&>(r).released(i); });
        };
    pg.on_release = [&] {
        for (int conn : pg.listeners())
            ps[static_cast<std::size_t>(conn % 10)]->push(
                conn, [](sim::recipe& r) { static_cast<pg_recipe&>(r).released(); });
    };
    pg.on_grant = [&](const std::string& token, std::uint64_t fence, milliseconds ttl) {
        for (int conn : pg.listeners())
            ps[static_cast<std::size_t>(conn % 10)]->push(
                conn, [token, fence, ttl](sim::recipe& r) { static_cast<pg_recipe&>(r).granted(token, fence, ttl); });
    };
    etcd.on_deleted = [&](int conn, const std::string& key) {
        ps[static_cast<std::size_t>(conn % 10)]->push(
            conn, [key](sim::recipe& r) { static_cast<etcd_recipe&>(r).deleted(key); });
    };
    for (auto& p : ps)
        p->start();

    // The faults of the plan.
    auto own = plan ? std::vector<fault_event>() : fault_plan(seed, processes);
    for (const auto& f : plan ? *plan : own) {
        w.at(f.at, [&, f] {
            auto& p = *ps[static_cast<std::size_t>(f.process)];
            switch (f.what) {
            case fault_event::kind::pause: p.pause(f.length); break;
            case fault_event::kind::crash: p.crash(f.length); break;
            case fault_event::kind::partition: p.partition(f.length); break;
            case fault_event::kind::stall: p.stall_replies(f.length); break;
            case fault_event::kind::drop: p.drop_connection(); break;
            case fault_event::kind::restart:
                ++faults.restarts;
                if (on_mc && bad.evicts) {  // memory pressure, not a restart: the lock item goes
                    if (mc.evict(memcached_recipe::keys().lock_text))
                        w.log("memcached evicted the lock item");
                    break;
                }
                if (on_mc && bad.node_loses_data) {
                    w.log("memcached restarted without its items");
                    mc.restart();
                }
                if (on_redlock) {  // one node restarts; the others run on
                    auto k = static_cast<std::size_t>(f.process) % rl.nodes.size();
                    w.log("redlock node " + std::to_string(k) + " restarted" +
                          (bad.node_loses_data ? " without its data" : ""));
                    if (bad.node_loses_data)
                        rl.nodes[k].restart_losing_data();
                    else
                        rl.nodes[k].restart();
                    rl.down_until[k] = w.now() + f.length;
                    w.after(f.length, [&, k] {
                        for (auto& q : ps)
                            if (q->up())
                                q->push(q->conn(),
                                        [k](sim::recipe& r) { static_cast<redlock_recipe&>(r).node_back(k); });
                    });
                    break;
                }
                // Redis: a restart with its data (AOF). etcd: a member restart that moves
                // the leader, which starts every lease's TTL again.
                w.log(on_etcd ? "etcd leader changed" : on_zk ? "zookeeper server restarted" : "server restarted");
                if (on_etcd)
                    etcd.leader_change();
                else if (!on_zk && !on_pg && !on_maria && !on_mc)  // the ensemble, the WALs keep it all
                    srv.restart();
                shared.server_down_until = w.now() + f.length;
                for (auto& q : ps)
                    q->drop_connection();
                break;
            }
        });
    }
    w.run_until(fault_end);
    // The drain: no more faults or new acquires; every waiter must be served in time.
    shared.faults_on = false;
    w.log("faults stop; draining");
    // FIFO where the store promises it (a direct hand-off's queue): from now on no acquire
    // takes the name ahead of a waiter queued before it.
    auto barge = [&](const std::string& taker, const std::string& waiter) {
        chk.violation("FIFO: " + taker + " took the name while " + waiter + ", queued before it, still waited");
    };
    if (store == "redis")
        srv.on_barge = barge;
    pg.on_barge = barge;
    for (auto& p : ps)
        p->drain();
    w.run_until(fault_end + bound);
    for (auto& p : ps)
        if (!p->quiet())
            chk.violation("liveness: " + p->name() + " still waits, holds or talks to the store " +
                          std::to_string(bound.count() / 1'000'000) + " ms after the faults stopped (" + p->state() +
                          ")");
    auto holder = on_pg ? pg.holder(w.now()) : srv.holder(w.now());
    auto left = on_pg     ? pg.leftovers(w.now())
                : on_zk   ? zk.leftovers()
                : on_etcd ? etcd.leftovers()
                          : srv.leftovers(w.now());
    if (on_mc) {
        if (auto v = mc.value(memcached_recipe::keys().lock_text, w.now()))
            holder = *v;
        for (const auto& k : mc.keys(w.now()))
            if (k != "dlock:fence:x" && k != memcached_recipe::keys().lock_text && left.empty())
                left = "the item " + k;
    }
    if (on_redlock) {
        for (auto& m : rl.nodes)
            if (auto h = m.holder(w.now()); h && !holder)
                holder = h;
        for (auto& m : rl.nodes)
            if (auto l = m.leftovers(w.now()); !l.empty() && left.empty())
                left = l;
    }
#if DLOCK_SIM_MARIADB
    if (on_maria) {
        holder = maria.holder(w.now());
        left = maria.leftovers(w.now());
    }
#endif
    if (auto h = holder)
        chk.violation("left behind: the lock is still held by " + *h);
    if (!left.empty())
        chk.violation("left behind: " + left);

    schedule_result r;
    r.ok = chk.ok();
    r.violation = chk.first();
    r.trace = w.trace();
    r.faults = faults;
    r.grants = chk.grants();
    r.writes = chk.writes();
    return r;
}

}  // namespace dlock::sim
