// SPDX-License-Identifier: BSL-1.0
/*
 * pitfalls_lab: the lock recipes of the write-ups dlock grew from, next to dlock, under the
 * same workload and the same injected faults, in one table.
 *
 * Workload: P worker processes (this program again, in worker mode) x C coroutines, each
 * looping over a critical section that does a read-modify-write of a counter: acquire, read,
 * work a few ms, write the value read + 1, release. The counter lives on a second, separate
 * redis-server (the "resource"), so the lock server's command count is the locks' alone.
 * The resource is a few Lua scripts that watch what the lock is supposed to prevent:
 *   read(section, token)          records the last reader, returns the counter
 *   write(section, value, token)  counts an overlap when another section has read since
 *                                 this one did (two read-modify-writes interleaved: two
 *                                 holders at once, as the resource sees it), then applies it
 * Both refuse ("fenced") a nonzero token lower than the highest token they have seen; the
 * recipes have no tokens (0: always accepted), dlock passes guard.fencing_token().
 *
 * Rows, each written as its write-up writes it (../shared/seeds in the project's notes):
 *   setnx+expire                       SETNX, then PEXPIRE (the lab's lease is in ms): two
 *                                      commands; release DEL (seeds 002, 003, 004)
 *   setnx/getset timestamps            SETNX key <now+lease>; else GET, and if that time has
 *                                      passed GETSET, won if it returned the value GET saw;
 *                                      release GET, DEL if still ours (seed 000). Reads the
 *                                      worker's wall clock.
 *   SET NX PX, DEL without owner check release is a plain DEL (seed 003, v3)
 *   SET NX PX, fixed lease, no renewal release is compare-and-delete in Lua (seeds 000, 002)
 *   100 ms polling                     the same, waiting by sleeping 100 ms between tries
 *                                      (seed 001: Spring's RedisLockRegistry)
 *   dlock                              registry + acquire, watchdog on; checks valid_until()
 *                                      before writing, and writes with the fencing token
 * The first four retry every 10 ms while they wait, as seed 004's loops do.
 *
 * Faults, the same in every row, each striking whichever worker gets there first:
 *   slow   from 3/10 of the row, one section works 2 x the lease
 *   skew   the workers' wall clocks are offset by 0, +S, -S, 0, ... (only the timestamp
 *          recipe reads wall clocks; dlock never compares them)
 *   pause  from 11/20 of the row, the parent SIGSTOPs a worker inside a section, right
 *          before its write (after dlock's validity check), for 2 x the lease, then SIGCONTs it
 *   kill   from 3/4 of the row, a worker _exits between the two commands of an acquire (right
 *          after acquiring, for one-command recipes), at a moment when no other section is
 *          in progress; it is not restarted
 *
 * Columns: sections (writes the resource accepted), overlaps, lost updates (accepted writes
 * - final counter), stuck (the lock key left without a TTL, so no client ever gets it
 * again), fenced (stale reads and writes refused), wait p50/p99 (acquire start -> acquired;
 * a wait the end of the row cut short counts as what it had waited), commands per section
 * (the lock server's total_commands_processed delta / sections).
 *
 *   pitfalls_lab            two throwaway redis-servers on free loopback ports; the table
 *   pitfalls_lab --json     one JSON object per row instead (what the tests check)
 *   pitfalls_lab --workers 4 --coroutines 4 --lease-ms 300 --row-ms 4000 --work-ms 4
 *                --skew-ms 3000 --only dlock
 *
 * Timeouts: each row runs --row-ms; then workers finish their section and report, within
 * 2 x lease + 3 s, or are killed and counted as hung. Workers get 30 s to connect and 60 s
 * for the start signal; a dlock worker waits at most 2 s for background releases at the end.
 * The parent's own commands give up after 10 s.
 * Exits 0 when the dlock row had no overlap, no lost update, nothing stuck and sections > 0.
 */
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// The exit status of the worker the kill fault ends.
constexpr int killed_status = 86;

enum class recipe {
    setnx_expire,
    timestamps,
    del_no_owner,
    fixed_lease,
    polling,
    dlock_lock
};

struct recipe_info {
    recipe id;
    const char* slug;   // command-line name
    const char* title;  // the table's row, and "recipe" in the JSON
};

constexpr recipe_info recipes[] = {
    {recipe::setnx_expire, "setnx-expire", "setnx+expire"},
    {recipe::timestamps, "timestamps", "setnx/getset timestamps"},
    {recipe::del_no_owner, "del-no-owner", "SET NX PX, DEL without owner check"},
    {recipe::fixed_lease, "fixed-lease", "SET NX PX, fixed lease, no renewal"},
    {recipe::polling, "polling", "100 ms polling"},
    {recipe::dlock_lock, "dlock", "dlock"},
};

const recipe_info* find_recipe(std::string_view slug)
{
    for (const auto& r : recipes)
        if (slug == r.slug)
            return &r;
    return nullptr;
}

struct settings {
    int workers = 4;
    int coroutines = 4;
    long lease_ms = 300;
    long row_ms = 4000;
    long work_ms = 4;
    long skew_ms = 3000;
    bool json = false;
    std::string only;
};

// When each fault strikes (offsets from the row's start). It strikes whichever worker gets
// there first, claimed on the resource server, so a worker that never gets the lock (a
// polling lock is unfair) cannot dodge it.
milliseconds kill_at(const settings& s)
{
    return milliseconds(s.row_ms * 3 / 4);
}
milliseconds slow_at(const settings& s)
{
    return milliseconds(s.row_ms * 3 / 10);
}
milliseconds pause_at(const settings& s)
{
    return milliseconds(s.row_ms * 11 / 20);
}

long skew_of(const settings& s, int worker)
{
    switch (worker % 4) {
    case 1: return s.skew_ms;
    case 2: return -s.skew_ms;
    default: return 0;
    }
}

// ---- the resource: a counter that notices two holders at once -------------------------

const std::string k_counter = "pitfalls:counter", k_last_reader = "pitfalls:last-reader",
                  k_highest = "pitfalls:highest-token", k_fenced = "pitfalls:fenced", k_overlaps = "pitfalls:overlaps",
                  k_writes = "pitfalls:writes", k_active = "pitfalls:active", k_kill = "pitfalls:fault:kill",
                  k_slow = "pitfalls:fault:slow", k_pause = "pitfalls:fault:pause",
                  k_pause_queue = "pitfalls:fault:pause-queue";

// KEYS: counter, last reader, highest token, fenced, active. ARGV: section, token.
// Returns {1, counter} or {0, 0} when the token is stale.
const redis::script read_script(R"lua(
local token = tonumber(ARGV[2])
if token > 0 then
    if token < tonumber(redis.call('GET', KEYS[3]) or '0') then
        redis.call('INCR', KEYS[4])
        return {0, 0}
    end
    redis.call('SET', KEYS[3], ARGV[2])
end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[1])
return {1, tonumber(redis.call('GET', KEYS[1]) or '0')}
)lua");

// KEYS: counter, last reader, highest token, fenced, overlaps, writes.
// ARGV: section, value, token. Returns 1 when applied, 0 when the token is stale.
const redis::script write_script(R"lua(
local token = tonumber(ARGV[3])
if token > 0 then
    if token < tonumber(redis.call('GET', KEYS[3]) or '0') then
        redis.call('INCR', KEYS[4])
        return 0
    end
    redis.call('SET', KEYS[3], ARGV[3])
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
    redis.call('INCR', KEYS[5])
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('INCR', KEYS[6])
return 1
)lua");

// KEYS: active sections, kill claim. ARGV: worker, force. Returns 1: die now (claimed while
// no other section was in progress, or forced); 0: not now; 2: another worker died already.
const redis::script kill_claim(R"lua(
if ARGV[2] ~= '1' and redis.call('SCARD', KEYS[1]) > 0 then
    return 0
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX') then
    return 1
end
return 2
)lua");

// KEYS: pause claim, pause queue. ARGV: worker. The claim and the parent's queue change
// together, so the parent, which closes the claim when the row ends, never misses one.
const redis::script pause_claim(R"lua(
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
    redis.call('RPUSH', KEYS[2], ARGV[1])
    return 1
end
return 0
)lua");

// The write-ups' owner-checked release (seeds 000, 002, 003: "if get == value then del").
const redis::script compare_and_delete(
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end");

// ---- worker process ---------------------------------------------------------------------

struct worker_args {
    settings cfg;
    recipe id = recipe::dlock_lock;
    int index = 0;
    std::string lock_url, resource_url;
};

struct worker {
    const worker_args& a;
    redis::connection& res;
    redis::connection* lock_conn = nullptr;  // the recipes
    dlock::registry* locks = nullptr;        // dlock
    asio::signal_set* sigcont = nullptr;     // woken when the parent ends the pause
    std::string lock_key{};
    clock_type::time_point t0{}, deadline{};

    // Fault bookkeeping: a fault is "done" here once it struck anywhere.
    bool kill_done = false, slow_done = false, pause_done = false;
    int kill_tries = 0;
    long abandoned = 0;
    std::vector<std::int64_t> waits_us{};
};

// One hold: the recipes' value, or dlock's guard and fencing token.
struct hold {
    std::string value;
    dlock::guard guard;
    std::uint64_t token = 0;
};

milliseconds lease(const worker& w)
{
    return milliseconds(w.a.cfg.lease_ms);
}

asio::awaitable<redis::response> exec(redis::connection& c, const redis::request& req)
{
    auto [ec, resp] = co_await c.async_exec(req, use_tuple);
    if (ec)
        throw boost::system::system_error(ec, "redis");
    co_return resp;
}

asio::awaitable<redis::reply> eval(redis::connection& c, const redis::script& s, std::vector<std::string> keys,
                                   std::vector<std::string> args)
{
    auto [ec, r] = co_await c.async_eval(s, keys, args, use_tuple);
    if (ec)
        throw boost::system::system_error(ec, "redis script");
    co_return r;
}

asio::awaitable<void> sleep_for(milliseconds d)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_tuple);
}

// The worker's wall clock in ms, with its skew (the timestamp recipe's "now").
long long wall_ms(const worker& w)
{
    auto now = std::chrono::system_clock::now() + milliseconds(skew_of(w.a.cfg, w.a.index));
    return std::chrono::duration_cast<milliseconds>(now.time_since_epoch()).count();
}

// The kill fault: a holder dies holding the lock. It picks a moment when no other section is in
// progress (for 50 tries), so no stale holder's DEL can clean up after it: the fault shows
// what the recipe itself does with a dead holder's key.
asio::awaitable<void> maybe_kill(worker& w)
{
    if (w.kill_done || clock_type::now() < w.t0 + kill_at(w.a.cfg))
        co_return;
    // Forced after 50 tries while others are in a section, except between SETNX and
    // EXPIRE: a paused or slow holder still in its section would DEL (no owner check) the
    // key the kill leaves without a TTL, and the row would not show the lock it leaves stuck.
    bool force = ++w.kill_tries >= 50 && w.a.id != recipe::setnx_expire;
    std::vector<std::string> keys{k_active, k_kill}, args{std::to_string(w.a.index), force ? "1" : "0"};
    auto r = co_await eval(w.res, kill_claim, std::move(keys), std::move(args));
    if (r.integer == 1) {
        std::fflush(stdout);
        ::_exit(killed_status);
    }
    w.kill_done = r.integer == 2;
}

// Claims a one-off fault for this worker if its time has come and nobody has it yet.
asio::awaitable<bool> claim(worker& w, bool& done, milliseconds at, const std::string& key)
{
    if (done || clock_type::now() < w.t0 + at)
        co_return false;
    done = true;
    redis::request req;
    req.push("SET", key, w.a.index, "NX");
    co_return !(co_await exec(w.res, req))[0].is_nil();
}

asio::awaitable<bool> acquire(worker& w, hold& h)
{
    auto& c = *w.lock_conn;
    const auto lease_ms = w.a.cfg.lease_ms;
    for (;;) {
        if (clock_type::now() >= w.deadline)
            co_return false;
        redis::request req;
        switch (w.a.id) {
        case recipe::setnx_expire: {
            req.push("SETNX", w.lock_key, h.value);
            if ((co_await exec(c, req))[0].integer == 1) {
                co_await maybe_kill(w);  // between the two commands
                redis::request expire;
                expire.push("PEXPIRE", w.lock_key, lease_ms);
                co_await exec(c, expire);
                co_return true;
            }
            break;
        }
        case recipe::timestamps: {
            h.value = std::to_string(wall_ms(w) + lease_ms);
            req.push("SETNX", w.lock_key, h.value);
            if ((co_await exec(c, req))[0].integer == 1)
                co_return true;
            redis::request get;
            get.push("GET", w.lock_key);
            auto current = (co_await exec(c, get))[0];
            long long stamp = 0;
            std::from_chars(current.str.data(), current.str.data() + current.str.size(), stamp);
            if (!current.is_nil() && stamp < wall_ms(w)) {
                redis::request getset;
                getset.push("GETSET", w.lock_key, h.value);
                auto old = (co_await exec(c, getset))[0];
                if (!old.is_nil() && old.str == current.str)
                    co_return true;
            }
            break;
        }
        case recipe::del_no_owner:
        case recipe::fixed_lease:
        case recipe::polling: {
            req.push("SET", w.lock_key, h.value, "NX", "PX", lease_ms);
            if (!(co_await exec(c, req))[0].is_nil())
                co_return true;
            break;
        }
        case recipe::dlock_lock: break;
        }
        co_await sleep_for(w.a.id == recipe::polling ? 100ms : 10ms);
    }
}

asio::awaitable<bool> acquire_dlock(worker& w, hold& h)
{
    auto left = std::chrono::ceil<milliseconds>(w.deadline - clock_type::now());
    if (left <= 0ms)
        co_return false;
    auto [ec, g] = co_await w.locks->obtain("counter").acquire_for(left, use_tuple);
    if (ec == dlock::error::timeout)
        co_return false;
    if (ec)
        throw boost::system::system_error(ec, "acquire");
    h.guard = std::move(g);
    h.token = h.guard.fencing_token();
    co_return true;
}

asio::awaitable<void> release(worker& w, hold& h)
{
    if (w.a.id == recipe::dlock_lock) {
        co_await h.guard.release(use_tuple);  // lock_lost after a pause: nothing to do
        co_return;
    }
    auto& c = *w.lock_conn;
    redis::request req;
    switch (w.a.id) {
    case recipe::timestamps: {
        req.push("GET", w.lock_key);
        if ((co_await exec(c, req))[0].str == h.value) {
            redis::request del;
            del.push("DEL", w.lock_key);
            co_await exec(c, del);
        }
        break;
    }
    case recipe::fixed_lease:
    case recipe::polling: {
        std::vector<std::string> keys{w.lock_key}, args{h.value};  // named: g++ 12 rejects braces in co_await
        co_await eval(c, compare_and_delete, std::move(keys), std::move(args));
        break;
    }
    default:
        req.push("DEL", w.lock_key);
        co_await exec(c, req);
        break;
    }
}

// One coroutine's sections until the row ends.
asio::awaitable<void> sections(worker& w, int co)
{
    const auto& cfg = w.a.cfg;
    for (long n = 0; clock_type::now() < w.deadline; ++n) {
        hold h;
        h.value = std::to_string(w.a.index) + "." + std::to_string(co) + "." + std::to_string(n);
        const auto start = clock_type::now();
        bool held = w.a.id == recipe::dlock_lock ? co_await acquire_dlock(w, h) : co_await acquire(w, h);
        w.waits_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start).count());
        if (!held)
            break;
        if (w.a.id != recipe::setnx_expire)
            co_await maybe_kill(w);  // right after acquiring

        std::vector<std::string> read_keys{k_counter, k_last_reader, k_highest, k_fenced, k_active},
            read_args{h.value, std::to_string(h.token)};
        auto r = co_await eval(w.res, read_script, std::move(read_keys), std::move(read_args));
        if (r.elements.size() == 2 && r.elements[0].integer == 1) {
            const long long value = r.elements[1].integer;
            // The slow fault: one section works twice the lease.
            bool slow = co_await claim(w, w.slow_done, slow_at(cfg), k_slow);
            co_await sleep_for(slow ? 2 * lease(w) : milliseconds(cfg.work_ms));
            if (w.a.id == recipe::dlock_lock && clock_type::now() >= h.guard.valid_until()) {
                ++w.abandoned;  // the lease ran out: do not write
            } else {
                // The pause fault: the parent stops this process here, after the last look at the lease
                // (not too close to the row's end: the parent must see the claim in time).
                if (!w.pause_done && clock_type::now() >= w.t0 + pause_at(cfg) &&
                    clock_type::now() + 2 * lease(w) < w.deadline) {
                    w.pause_done = true;
                    std::vector<std::string> keys{k_pause, k_pause_queue}, args{std::to_string(w.a.index)};
                    if ((co_await eval(w.res, pause_claim, std::move(keys), std::move(args))).integer == 1) {
                        co_await w.sigcont->async_wait(use_tuple);
                    }
                }
                std::vector<std::string> keys{k_counter, k_last_reader, k_highest, k_fenced, k_overlaps, k_writes},
                    args{h.value, std::to_string(value + 1), std::to_string(h.token)};
                co_await eval(w.res, write_script, std::move(keys), std::move(args));
            }
        }
        co_await release(w, h);
        redis::request leave;
        leave.push("SREM", k_active, h.value);
        co_await exec(w.res, leave);
    }
}

redis::config parse_or_throw(const std::string& url)
{
    redis::config rc;
    redis::config_error err;
    if (!redis::parse_url(url, rc, err))
        throw std::runtime_error(err.message);
    rc.client_name = "pitfalls-lab";
    return rc;
}

int run_worker(const worker_args& a)
{
    asio::io_context io;
    redis::connection res(io.get_executor(), parse_or_throw(a.resource_url));
    const auto lock_cfg = parse_or_throw(a.lock_url);
    std::optional<redis::connection> lock_conn;
    std::optional<dlock::redis_store> store;
    std::optional<dlock::registry> locks;
    asio::signal_set sigcont(io, SIGCONT);
    worker w{.a = a, .res = res, .sigcont = &sigcont};
    if (a.id == recipe::dlock_lock) {
        store.emplace(io.get_executor(), lock_cfg, "pitfalls");
        // The lease is how long a dead or stopped holder keeps the lock; the watchdog renews
        // it every lease / 3 while the holder runs.
        locks.emplace(*store, dlock::lock_config{.prefix = "pitfalls", .lease = milliseconds(a.cfg.lease_ms)});
        w.locks = &*locks;
    } else {
        lock_conn.emplace(io.get_executor(), lock_cfg);
        w.lock_conn = &*lock_conn;
    }
    for (const auto& r : recipes)
        if (r.id == a.id)
            w.lock_key = std::string("pitfalls:lock:") + r.slug;

    std::exception_ptr failure;
    auto finish = [&] {
        sigcont.cancel();
        res.close();
        if (lock_conn)
            lock_conn->close();
        if (store)
            store->close();
    };
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto [rec] = co_await res.async_connect(use_tuple);
            if (rec)
                throw boost::system::system_error(rec, "resource server");
            boost::system::error_code lec;
            if (store)
                std::tie(lec) = co_await store->async_connect(use_tuple);
            else
                std::tie(lec) = co_await lock_conn->async_connect(use_tuple);
            if (lec)
                throw boost::system::system_error(lec, "lock server");
            std::cout << "ready" << std::endl;
            // The start barrier: the parent pushes the row's start (steady clock, shared by
            // the processes of one machine) once every worker is ready.
            redis::request start;
            start.push("BLPOP", "pitfalls:start:" + std::to_string(a.index), 60);
            auto [ec, resp] = co_await res.async_exec(start, milliseconds(0), use_tuple);
            if (ec || resp[0].elements.size() != 2)
                throw std::runtime_error("no start signal");
            long long t0 = 0;
            const auto& s = resp[0].elements[1].str;
            std::from_chars(s.data(), s.data() + s.size(), t0);
            w.t0 = clock_type::time_point(std::chrono::nanoseconds(t0));
            w.deadline = w.t0 + milliseconds(a.cfg.row_ms);

            int running = a.cfg.coroutines;
            asio::steady_timer all_done(co_await asio::this_coro::executor, clock_type::time_point::max());
            for (int co = 0; co < a.cfg.coroutines; ++co)
                asio::co_spawn(io, sections(w, co), [&](std::exception_ptr e) {
                    if (e && !failure)
                        failure = e;
                    if (--running == 0)
                        all_done.cancel();
                });
            if (running > 0)  // a loop that found the row over at once may already have ended
                co_await all_done.async_wait(use_tuple);
            if (locks) {  // background releases behind cancelled attempts, bounded
                using namespace asio::experimental::awaitable_operators;
                asio::steady_timer bound(co_await asio::this_coro::executor, 2s);
                co_await (locks->async_drain(use_tuple) || bound.async_wait(use_tuple));
            }
        },
        [&](std::exception_ptr e) {
            if (e && !failure)
                failure = e;
            finish();
        });
    io.run();
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            std::cerr << "pitfalls_lab worker " << a.index << ": " << e.what() << "\n";
            return 1;
        }
    }
    boost::json::object out{{"abandoned", w.abandoned}};
    boost::json::array waits;
    for (auto us : w.waits_us)
        waits.push_back(us);
    out["waits_us"] = std::move(waits);
    std::cout << boost::json::serialize(out) << std::endl;
    return 0;
}

// ---- the lab: parent process --------------------------------------------------------------

// One request on a short-lived connection (the parent's few set-up and measuring commands).
redis::response blocking_exec(const redis::config& rc, const redis::request& req, milliseconds timeout = 10s)
{
    asio::io_context io;
    redis::connection c(io.get_executor(), rc);
    boost::system::error_code ec;
    redis::response out;
    c.async_exec(req, timeout, [&](boost::system::error_code e, redis::response r) {
        ec = e;
        out = std::move(r);
        c.close();
    });
    io.run();
    if (ec)
        throw boost::system::system_error(ec, "pitfalls_lab: redis");
    return out;
}

long long total_commands(const redis::config& rc)
{
    redis::request req;
    req.push("INFO", "stats");
    auto text = blocking_exec(rc, req)[0].str;
    const std::string field = "total_commands_processed:";
    auto at = text.find(field);
    long long n = 0;
    if (at != std::string::npos)
        std::from_chars(text.data() + at + field.size(), text.data() + text.size(), n);
    return n;
}

struct row_result {
    const recipe_info* info = nullptr;
    long long sections = 0, overlaps = 0, lost = 0, fenced = 0, commands = 0, abandoned = 0;
    int stuck = 0;
    bool killed = false, slow = false, paused = false;
    int hung = 0, failed = 0;
    std::vector<std::int64_t> waits_us{};
    std::string left;  // what the lock key held at the end

    double quantile_ms(double q) const
    {
        if (waits_us.empty())
            return 0;
        auto v = waits_us;
        auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
        return static_cast<double>(v[k]) / 1000.0;
    }
    std::optional<double> per_section() const
    {
        if (sections == 0)
            return std::nullopt;
        return static_cast<double>(commands) / static_cast<double>(sections);
    }
};

struct lab {
    settings cfg;
    std::string self;
    std::string lock_url, resource_url;
    redis::config lock_rc, resource_rc;
};

void take_report(row_result& r, const std::string& line)
{
    boost::system::error_code ec;
    auto v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) {
        ++r.failed;
        return;
    }
    auto& o = v.as_object();
    r.abandoned += o["abandoned"].to_number<long long>();
    for (const auto& us : o["waits_us"].as_array())
        r.waits_us.push_back(us.to_number<std::int64_t>());
}

std::vector<std::string> worker_argv(const lab& l, const recipe_info& info, int index)
{
    const auto& c = l.cfg;
    std::vector<std::string> argv{l.self, "--worker", info.slug, "--index", std::to_string(index)};
    for (auto [flag, value] : {std::pair{"--lock-url", l.lock_url},
                               {"--resource-url", l.resource_url},
                               {"--workers", std::to_string(c.workers)},
                               {"--coroutines", std::to_string(c.coroutines)},
                               {"--lease-ms", std::to_string(c.lease_ms)},
                               {"--row-ms", std::to_string(c.row_ms)},
                               {"--work-ms", std::to_string(c.work_ms)},
                               {"--skew-ms", std::to_string(c.skew_ms)}}) {
        argv.push_back(flag);
        argv.push_back(value);
    }
    return argv;
}

row_result run_row(const lab& l, const recipe_info& info)
{
    const auto& cfg = l.cfg;
    row_result r;
    r.info = &info;
    redis::request flush;
    flush.push("FLUSHALL");
    blocking_exec(l.lock_rc, flush);
    blocking_exec(l.resource_rc, flush);

    std::vector<std::unique_ptr<dlock::test::child>> workers;
    for (int i = 0; i < cfg.workers; ++i)
        workers.push_back(std::make_unique<dlock::test::child>(worker_argv(l, info, i)));
    for (auto& w : workers)
        if (w->read_line(30s) != "ready")
            throw std::runtime_error(std::string("a worker of ") + info.title + " did not start");

    const long long commands_before = total_commands(l.lock_rc);
    const auto t0 = clock_type::now();
    const auto deadline = t0 + milliseconds(cfg.row_ms);
    redis::request go;
    for (int i = 0; i < cfg.workers; ++i)
        go.push("LPUSH", "pitfalls:start:" + std::to_string(i),
                std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count());
    blocking_exec(l.resource_rc, go);

    // The pause fault: a worker inside a section claims it; the parent stops that process
    // for twice the lease. At the row's end the parent takes the claim itself, so a worker
    // that claimed at the last moment is still seen (the claim queues it atomically).
    auto pop_pause = [&](double seconds) {
        redis::request req;
        if (seconds > 0)
            req.push("BLPOP", k_pause_queue, std::to_string(seconds));
        else
            req.push("LPOP", k_pause_queue);
        auto reply = blocking_exec(l.resource_rc, req, 0ms)[0];
        const auto& s = reply.elements.size() == 2 ? reply.elements[1].str : reply.str;
        long index = -1;
        std::from_chars(s.data(), s.data() + s.size(), index);
        return reply.is_nil() ? -1L : index;
    };
    long paused = pop_pause(std::max(0.001, std::chrono::duration<double>(deadline - clock_type::now()).count()));
    if (paused < 0) {
        redis::request close;
        close.push("SET", k_pause, "parent", "NX");
        if (blocking_exec(l.resource_rc, close)[0].is_nil())
            paused = pop_pause(0);
    }
    if (paused >= 0 && paused < cfg.workers) {
        auto& w = *workers[static_cast<std::size_t>(paused)];
        w.signal(SIGSTOP);
        // This sleep is the fault itself (a stopped process), not a synchronisation.
        std::this_thread::sleep_for(2 * milliseconds(cfg.lease_ms));
        w.signal(SIGCONT);
        r.paused = true;
    }

    // Each worker finishes the section it is in and reports (a JSON line); one that has not
    // by the hard stop is stuck, and killed.
    const auto hard_stop = deadline + 2 * milliseconds(cfg.lease_ms) + 3s;
    for (auto& wp : workers) {
        auto& w = *wp;
        auto report =
            w.read_line(std::max(std::chrono::duration_cast<milliseconds>(hard_stop - clock_type::now()), 0ms));
        if (!report) {
            int status = w.wait(100ms);
            if (status == killed_status)
                r.killed = true;
            else if (status == -1) {
                ++r.hung;
                w.signal(SIGKILL);
                w.wait(5s);
            } else
                ++r.failed;
            continue;
        }
        take_report(r, *report);
        if (w.wait(5s) != 0)
            ++r.failed;
    }
    r.commands = total_commands(l.lock_rc) - commands_before - 1;  // less the first INFO

    redis::request stats;
    stats.push("MGET", k_writes, k_counter, k_overlaps, k_fenced, k_slow, k_kill);
    auto resp = blocking_exec(l.resource_rc, stats);
    auto num = [&](std::size_t i) {
        long long v = 0;
        const auto& s = resp[0].elements[i].str;
        std::from_chars(s.data(), s.data() + s.size(), v);
        return v;
    };
    r.sections = num(0);
    r.lost = num(0) - num(1);
    r.overlaps = num(2);
    r.fenced = num(3);
    r.slow = !resp[0].elements[4].is_nil();  // claimed: the report of a worker killed later is lost

    // Stuck: the lock key is left without a TTL and the recipe has no way to take it back
    // (the timestamp recipe takes back an expired stamp, so its leftover only delays).
    std::string key = std::string("pitfalls:lock:") + info.slug;
    if (info.id == recipe::dlock_lock) {
        asio::io_context io;
        dlock::redis_store s(io.get_executor(), l.lock_rc, "pitfalls");
        key = s.lock_key("pitfalls:counter");
    }
    redis::request look;
    look.push("PTTL", key);
    look.push("TYPE", key);
    auto seen = blocking_exec(l.lock_rc, look);
    const long long pttl = seen[0].integer;
    if (pttl == -1)
        r.left = "a key without TTL";
    else if (pttl >= 0)
        r.left = "a key with a TTL";
    if (pttl == -1 && info.id != recipe::timestamps)
        r.stuck = 1;
    return r;
}

std::string fmt(const char* f, double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

void print_table(const std::vector<row_result>& rows, const settings& cfg)
{
    std::printf("\n%-36s %8s %8s %6s %5s %6s %9s %9s %12s\n", "recipe", "sections", "overlaps", "lost", "stuck",
                "fenced", "wait p50", "wait p99", "cmds/section");
    for (const auto& r : rows) {
        auto per = r.per_section();
        std::printf("%-36s %8lld %8lld %6lld %5d %6lld %9s %9s %12s\n", r.info->title, r.sections, r.overlaps, r.lost,
                    r.stuck, r.fenced, fmt("%.1f ms", r.quantile_ms(0.50)).c_str(),
                    fmt("%.0f ms", r.quantile_ms(0.99)).c_str(), per ? fmt("%.2f", *per).c_str() : "-");
    }
    std::printf("\nFaults that struck (kill = a holder died mid-acquire, slow = a section of 2 x lease, "
                "pause = SIGSTOP %ld ms):\n",
                2 * cfg.lease_ms);
    for (const auto& r : rows) {
        std::printf("  %-36s kill %-3s slow %-3s pause %-3s", r.info->title, r.killed ? "yes" : "no",
                    r.slow ? "yes" : "no", r.paused ? "yes" : "no");
        if (r.abandoned)
            std::printf("  %lld section(s) saw their lease end and did not write", r.abandoned);
        if (!r.left.empty())
            std::printf("  left %s", r.left.c_str());
        if (r.hung || r.failed)
            std::printf("  %d worker(s) hung, %d failed", r.hung, r.failed);
        std::printf("\n");
    }
    std::printf("\n(cmds/section = lock-server commands per section. Skewed clocks: %+ld ms and %+ld ms; only\n"
                "the timestamp recipe reads them.)\n",
                cfg.skew_ms, -cfg.skew_ms);
}

boost::json::object to_json(const row_result& r)
{
    boost::json::object o{{"recipe", r.info->title},
                          {"slug", r.info->slug},
                          {"sections", r.sections},
                          {"overlaps", r.overlaps},
                          {"lost_updates", r.lost},
                          {"stuck", r.stuck},
                          {"fenced", r.fenced},
                          {"wait_p50_ms", r.quantile_ms(0.50)},
                          {"wait_p99_ms", r.quantile_ms(0.99)},
                          {"commands", r.commands},
                          {"killed", r.killed},
                          {"slow", r.slow},
                          {"paused", r.paused},
                          {"abandoned", r.abandoned},
                          {"hung_workers", r.hung},
                          {"failed_workers", r.failed}};
    if (auto per = r.per_section())
        o["commands_per_section"] = *per;
    else
        o["commands_per_section"] = nullptr;
    return o;
}

bool parse_long(const std::string& flag, const char* text, long& out, long min, long max)
{
    auto end = text + std::char_traits<char>::length(text);
    auto [p, ec] = std::from_chars(text, end, out);
    if (ec != std::errc() || p != end || out < min || out > max) {
        std::cerr << "pitfalls_lab: " << flag << " '" << text << "': expected a number from " << min << " to " << max
                  << "\n";
        return false;
    }
    return true;
}

const char* usage = "usage: pitfalls_lab [--json] [--only RECIPE] [--workers N] [--coroutines N] [--lease-ms N]\n"
                    "                    [--row-ms N] [--work-ms N] [--skew-ms N]\n"
                    "RECIPE: setnx-expire, timestamps, del-no-owner, fixed-lease, polling, dlock\n";

}  // namespace

int main(int argc, char** argv)
{
    settings cfg;
    worker_args wa;
    bool worker_mode = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::cout << usage;
            return 0;
        }
        if (a == "--json") {
            cfg.json = true;
            continue;
        }
        if (i + 1 >= argc) {
            std::cerr << "pitfalls_lab: unknown or incomplete option '" << a << "' (try --help)\n";
            return 2;
        }
        const char* v = argv[++i];
        long n = 0;
        bool ok = true;
        if (a == "--only" || a == "--worker") {
            auto r = find_recipe(v);
            if (!r) {
                std::cerr << "pitfalls_lab: " << a << " '" << v << "': no such recipe\n" << usage;
                return 2;
            }
            if (a == "--only")
                cfg.only = v;
            else {
                worker_mode = true;
                wa.id = r->id;
            }
        } else if (a == "--index" && (ok = parse_long(a, v, n, 0, 63)))
            wa.index = static_cast<int>(n);
        else if (a == "--lock-url")
            wa.lock_url = v;
        else if (a == "--resource-url")
            wa.resource_url = v;
        else if (a == "--workers" && (ok = parse_long(a, v, n, 3, 16)))
            cfg.workers = static_cast<int>(n);
        else if (a == "--coroutines" && (ok = parse_long(a, v, n, 1, 64)))
            cfg.coroutines = static_cast<int>(n);
        else if (a == "--lease-ms" && (ok = parse_long(a, v, n, 50, 10'000)))
            cfg.lease_ms = n;
        else if (a == "--row-ms" && (ok = parse_long(a, v, n, 1000, 120'000)))
            cfg.row_ms = n;
        else if (a == "--work-ms" && (ok = parse_long(a, v, n, 1, 1000)))
            cfg.work_ms = n;
        else if (a == "--skew-ms" && (ok = parse_long(a, v, n, 0, 60'000)))
            cfg.skew_ms = n;
        else {
            if (ok)
                std::cerr << "pitfalls_lab: unknown option '" << a << "' (try --help)\n";
            return 2;
        }
    }
    // The faults need room: the pause (2 x lease) starts at 55% of the row and others must
    // get the lock during it.
    if (cfg.row_ms < 10 * cfg.lease_ms || cfg.work_ms * 4 > cfg.lease_ms) {
        std::cerr << "pitfalls_lab: --row-ms must be at least 10 x --lease-ms, and --work-ms at most lease / 4\n";
        return 2;
    }
    if (worker_mode) {
        wa.cfg = cfg;
        try {
            return run_worker(wa);
        } catch (const std::exception& e) {
            std::cerr << "pitfalls_lab worker: " << e.what() << "\n";
            return 1;
        }
    }

    lab l;
    l.cfg = cfg;
    // Workers run this very file, even if a rebuild replaces it meanwhile: in the forked
    // child, /proc/self/exe still names the parent's executable.
    l.self = "/proc/self/exe";
    // Two throwaway servers: the locks on one, the counter they protect on the other.
    dlock::test::redis_server lock_server, resource_server;
    l.lock_url = lock_server.url();
    l.resource_url = resource_server.url();
    l.lock_rc = lock_server.config();
    l.resource_rc = resource_server.config();

    std::FILE* log = cfg.json ? stderr : stdout;
    std::fprintf(log,
                 "pitfalls lab: %d workers x %d coroutines, read-modify-write of one counter; lease %ld ms, "
                 "work %ld ms, %ld ms per row\n",
                 cfg.workers, cfg.coroutines, cfg.lease_ms, cfg.work_ms, cfg.row_ms);
    std::fflush(log);
    std::vector<row_result> rows;
    try {
        for (const auto& info : recipes) {
            if (!cfg.only.empty() && cfg.only != info.slug)
                continue;
            std::fflush(stdout);
            std::fprintf(stderr, "  %-36s ...\n", info.title);
            rows.push_back(run_row(l, info));
            if (cfg.json)
                std::cout << boost::json::serialize(to_json(rows.back())) << std::endl;
        }
    } catch (const std::exception& e) {
        std::cerr << "pitfalls_lab: " << e.what() << "\n";
        return 1;
    }
    if (!cfg.json)
        print_table(rows, cfg);
    int status = 0;
    for (const auto& r : rows) {
        if (r.failed || r.hung)
            status = 1;
        if (r.info->id == recipe::dlock_lock && (r.overlaps || r.lost || r.stuck || r.sections == 0)) {
            std::fprintf(stderr, "pitfalls_lab: FAILED: the dlock row shows a failure\n");
            status = 1;
        }
    }
    return status;
}
