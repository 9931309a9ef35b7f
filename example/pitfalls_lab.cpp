/*
 * pitfalls_lab: the lock recipes of the write-ups dlock grew from, run exactly as they are
 * written there, next to dlock, under one workload and the same injected faults.
 *
 * Workload: worker processes x coroutines doing read-modify-write of a counter under the
 * lock. The counter lives on a second redis-server (the "resource"), so the lock server
 * counts lock commands alone. The resource sees each section: `read` notes the reader,
 * `write` counts an overlap when another section has read since this one did (two
 * read-modify-writes interleaved = two holders at once) and refuses a write whose fencing
 * token is lower than one it has seen (token 0: unfenced, always accepted).
 *
 * Faults, the same in every row, one after another so that they do not mask each other
 * (worker 3 and up are healthy):
 *   slow     worker 1's first section from 5 % of the run on works 2 x the lease
 *   paused   worker 2 is SIGSTOPped inside its first section from 30 % of the run on, for
 *            2 x the lease
 *   killed   worker 0 dies (_exit) on its first acquire from 60 % of the run on, right after
 *            the first command (SETNX+EXPIRE: between the two; the others: once it holds)
 *   skewed   worker i's wall clock is off by {0, +3 s, -3 s}[i % 3] all along (only the
 *            timestamp recipe reads wall clocks)
 *
 * Rows: setnx+expire; setnx/get/getset timestamps; SET NX PX with a DEL that checks no owner;
 * SET NX PX with a fixed lease and no renewal (owner-checked release); 100 ms polling as
 * Spring's RedisLockRegistry did it (a local lock per process, a Lua obtain, a fixed
 * expireAfter, sleep 100 ms between tries); dlock.
 * Columns: sections (accepted writes), overlaps, lost updates (accepted writes - counter),
 * stuck (a fresh client could not take the lock within 5 s after the run), fenced or
 * aborted (stale writes refused / sections that found their lease gone), tries (attempts
 * that found the lock taken), starved (live workers that never got the lock), wait p50/p99
 * (waits cut off by the run's end included), lock commands per section.
 *
 *   pitfalls_lab [--json] [--seconds 4] [--workers 4] [--coroutines 4]
 */
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr milliseconds lease{500};
constexpr milliseconds work{5};
const std::string lock_key = "lab:lock";

const char* const recipes[] = {"setnx+expire",           "getset-timestamps", "del-without-owner-check",
                               "fixed-lease-no-renewal", "polling-100ms",     "dlock"};

// The resource: a counter whose writes tell overlapping and stale sections apart.
const char* const read_script = "redis.call('SET','lab:reader',ARGV[1]) return redis.call('GET','lab:counter')";
const char* const write_script = R"(
local tok = tonumber(ARGV[3])
if tok > 0 then
  local maxt = tonumber(redis.call('GET','lab:maxtok') or '0')
  if tok < maxt then redis.call('INCR','lab:fenced') return 0 end
  redis.call('SET','lab:maxtok',ARGV[3])
end
if redis.call('GET','lab:reader') ~= ARGV[1] then redis.call('INCR','lab:overlaps') end
redis.call('SET','lab:counter',ARGV[2])
redis.call('INCR','lab:writes')
return 1)";
// RedisLockRegistry's obtain script (re-entrant for the process's client id, fixed expiry).
const char* const obtain_script = R"(
local id = redis.call('GET', KEYS[1])
if id == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1
elseif not id then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0)";
const char* const compare_and_delete =
    "if redis.call('GET',KEYS[1]) == ARGV[1] then return redis.call('DEL',KEYS[1]) else return 0 end";

asio::awaitable<redis::response> exec(redis::connection& c, redis::request req)
{
    auto [ec, resp] = co_await c.async_exec(req, use_tuple);
    if (ec && ec != dlock::error::server_error)
        throw boost::system::system_error(ec, "redis");
    co_return resp;
}

template <class... Args>
asio::awaitable<redis::reply> cmd(redis::connection& c, Args&&... args)
{
    redis::request req;
    req.push(std::forward<Args>(args)...);
    auto resp = co_await exec(c, std::move(req));
    co_return resp.empty() ? redis::reply{} : resp[0];
}

asio::awaitable<void> pause_for(milliseconds d)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_tuple);
}

// One coroutine at a time per process (RedisLockRegistry's ReentrantLock).
struct local_mutex {
    bool held = false;
    std::deque<std::shared_ptr<asio::steady_timer>> waiting;
};

asio::awaitable<void> lock_local(local_mutex& m)
{
    while (m.held) {
        auto t =
            std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor, clock_type::time_point::max());
        m.waiting.push_back(t);
        co_await t->async_wait(use_tuple);
    }
    m.held = true;
}

void unlock_local(local_mutex& m)
{
    m.held = false;
    if (!m.waiting.empty()) {
        m.waiting.front()->cancel();
        m.waiting.pop_front();
    }
}

// ---- the worker ----------------------------------------------------------------------

struct worker_cfg {
    std::string recipe;
    std::uint16_t lock_port = 0, res_port = 0;
    int index = 0, coroutines = 4;
    milliseconds run{4000};
    bool probe = false;  // after the run: can a fresh client take the lock?
};

struct worker_state {
    const worker_cfg& cfg;
    redis::connection& lock_conn;
    redis::connection& res_conn;
    dlock::registry* reg = nullptr;
    clock_type::time_point deadline{};
    milliseconds skew{0};
    clock_type::time_point start{};
    int acquires = 0, aborted = 0;
    bool slowed = false;
    long long tries = 0;  // attempts that found the lock taken
    int worker_sections = 0;
    bool printed_inside = false;
    local_mutex local{};
    std::vector<double> waits_ms{};
    long long unique = 0;
};

// Wall-clock milliseconds as this worker's (skewed) clock reads them.
long long wall_ms(const worker_state& w)
{
    return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count() +
           w.skew.count();
}

// One lock taken by a recipe: what its release needs.
struct held {
    std::string value;
    std::uint64_t token = 0;  // dlock's fencing token; 0 for the recipes without one
    dlock::guard guard;
    bool local = false;  // holds the process's local lock (RedisLockRegistry)
};

// Whether the run has reached `fraction` of its length.
bool reached(const worker_state& w, double fraction)
{
    return clock_type::now() - w.start >= std::chrono::duration_cast<clock_type::duration>(w.cfg.run * fraction);
}

void crash_point(worker_state& w)
{
    if (w.cfg.index == 0 && !w.cfg.probe && reached(w, 0.6))
        ::_exit(0);  // killed mid-protocol: holding the lock, or half-way through taking it
}

// Takes the lock as the recipe does; false once the run's deadline passed.
asio::awaitable<bool> acquire(worker_state& w, held& h, const std::string& id)
{
    const auto& r = w.cfg.recipe;
    for (;;) {
        if (clock_type::now() >= w.deadline)
            co_return false;
        if (r == "setnx+expire") {
            if ((co_await cmd(w.lock_conn, "SETNX", lock_key, id)).integer == 1) {
                ++w.acquires;
                crash_point(w);  // between SETNX and EXPIRE
                co_await cmd(w.lock_conn, "EXPIRE", lock_key, lease.count() / 1000 + 1);
                h.value = id;
                co_return true;
            }
            ++w.tries;
            co_await pause_for(10ms);
        } else if (r == "getset-timestamps") {
            // The seed's loop, as written: value = this client's clock + the lease; spins.
            auto value = std::to_string(wall_ms(w) + lease.count());
            bool got = (co_await cmd(w.lock_conn, "SETNX", lock_key, value)).integer == 1;
            if (!got) {
                auto current = co_await cmd(w.lock_conn, "GET", lock_key);
                if (!current.is_nil() && std::stoll(current.str) < wall_ms(w)) {
                    auto old = co_await cmd(w.lock_conn, "GETSET", lock_key, value);
                    got = !old.is_nil() && old.str == current.str;
                }
            }
            if (got) {
                ++w.acquires;
                crash_point(w);
                h.value = value;
                co_return true;
            }
            ++w.tries;
        } else if (r == "polling-100ms") {
            // RedisLockRegistry: the process's own lock first, then obtain every 100 ms.
            if (!h.local) {
                co_await lock_local(w.local);
                h.local = true;
                if (clock_type::now() >= w.deadline) {
                    unlock_local(w.local);
                    h.local = false;
                    co_return false;
                }
            }
            auto client = std::to_string(::getpid());
            if ((co_await cmd(w.lock_conn, "EVAL", obtain_script, 1, lock_key, client, lease.count())).integer == 1) {
                ++w.acquires;
                crash_point(w);
                h.value = client;
                co_return true;
            }
            ++w.tries;
            co_await pause_for(100ms);
            if (clock_type::now() >= w.deadline) {
                unlock_local(w.local);
                h.local = false;
                co_return false;
            }
        } else if (r == "dlock") {
            auto lock = w.reg->obtain("lab");
            auto left = std::chrono::duration_cast<milliseconds>(w.deadline - clock_type::now());
            auto [ec, g] = co_await lock.acquire_for(std::max(left, milliseconds(1)), use_tuple);
            if (!g)
                co_return false;
            ++w.acquires;
            crash_point(w);
            h.token = g.fencing_token();
            h.guard = std::move(g);
            co_return true;
        } else {  // SET NX PX, three ways of waiting and releasing
            if (!(co_await cmd(w.lock_conn, "SET", lock_key, id, "NX", "PX", lease.count())).is_nil()) {
                ++w.acquires;
                crash_point(w);
                h.value = id;
                co_return true;
            }
            ++w.tries;
            co_await pause_for(10ms);
        }
    }
}

asio::awaitable<void> release(worker_state& w, held& h)
{
    const auto& r = w.cfg.recipe;
    if (r == "dlock") {
        co_await h.guard.release(use_tuple);
    } else if (r == "polling-100ms") {
        // RedisLockRegistry's unlock: is it still ours? then delete (two commands).
        auto current = co_await cmd(w.lock_conn, "GET", lock_key);
        if (!current.is_nil() && current.str == h.value)
            co_await cmd(w.lock_conn, "DEL", lock_key);
        unlock_local(w.local);
    } else if (r == "getset-timestamps") {
        // The seed's unlock: GET, compare with our value, DEL.
        auto current = co_await cmd(w.lock_conn, "GET", lock_key);
        if (!current.is_nil() && current.str == h.value)
            co_await cmd(w.lock_conn, "DEL", lock_key);
    } else if (r == "setnx+expire" || r == "del-without-owner-check") {
        co_await cmd(w.lock_conn, "DEL", lock_key);  // whoever holds it now
    } else {
        co_await cmd(w.lock_conn, "EVAL", compare_and_delete, 1, lock_key, h.value);
    }
}

asio::awaitable<void> sections(worker_state& w, int co)
{
    for (;;) {
        auto id = std::to_string(::getpid()) + ":" + std::to_string(co) + ":" + std::to_string(++w.unique);
        held h;
        auto t0 = clock_type::now();
        bool got = co_await acquire(w, h, id);
        // A wait cut off by the run's end counts too (as long as it lasted): starving shows.
        w.waits_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        if (!got)
            co_return;
        auto v = co_await cmd(w.res_conn, "EVAL", read_script, 0, id);
        long long counter = v.is_nil() ? 0 : std::stoll(v.str);
        if (w.cfg.index == 2 && !w.printed_inside && reached(w, 0.3)) {
            w.printed_inside = true;
            std::cout << "inside" << std::endl;  // the parent pauses us here
            co_await pause_for(200ms);
        }
        ++w.worker_sections;
        bool slow = w.cfg.index == 1 && !w.slowed && reached(w, 0.05);
        w.slowed = w.slowed || slow;
        co_await pause_for(slow ? 2 * lease : work);
        if (h.guard && clock_type::now() >= h.guard.valid_until()) {
            ++w.aborted;  // our lease ended while we worked: the write would not be ours to make
        } else {
            co_await cmd(w.res_conn, "EVAL", write_script, 0, id, counter + 1, static_cast<long long>(h.token));
        }
        co_await release(w, h);
    }
}

int run_worker(const worker_cfg& cfg)
{
    asio::io_context io;
    redis::config lc, rc;
    lc.port = cfg.lock_port;
    rc.port = cfg.res_port;
    redis::connection res(io.get_executor(), rc);
    dlock::redis_store store(io.get_executor(), lc);
    dlock::registry reg(store, {.prefix = "lab", .lease = lease});
    worker_state w{cfg, store.connection(), res, &reg};
    static constexpr int skews[] = {0, 3000, -3000};
    w.skew = milliseconds(skews[cfg.index % 3]);
    w.start = clock_type::now();
    w.deadline = w.start + cfg.run;
    int running = cfg.probe ? 1 : cfg.coroutines;
    std::exception_ptr failure;
    if (cfg.probe) {
        // One try, bounded by 5 s (beyond the lease and the clock skews): a lock nobody can
        // take by then is stuck.
        w.deadline = clock_type::now() + 5s;
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                held h;
                bool ok = co_await acquire(w, h, "probe");
                if (ok)
                    co_await release(w, h);
                std::cout << (ok ? "free" : "stuck") << std::endl;
            },
            [&](std::exception_ptr e) {
                failure = e;
                store.close();
                res.close();
            });
    } else {
        for (int c = 0; c < cfg.coroutines; ++c)
            asio::co_spawn(io, sections(w, c), [&](std::exception_ptr e) {
                if (e && !failure)
                    failure = e;
                if (--running == 0) {
                    store.close();
                    res.close();
                }
            });
    }
    io.run();
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            std::cerr << "pitfalls_lab worker: " << e.what() << "\n";
            return 1;
        }
    }
    if (!cfg.probe) {
        boost::json::array waits;
        for (auto x : w.waits_ms)
            waits.push_back(x);
        auto tries = cfg.recipe == "dlock" ? static_cast<long long>(reg.stats().contended) : w.tries;
        std::cout << boost::json::serialize(boost::json::object{{"aborted", w.aborted},
                                                                {"tries", tries},
                                                                {"sections", w.worker_sections},
                                                                {"waits_ms", waits}})
                  << std::endl;
    }
    return 0;
}

// ---- the parent ----------------------------------------------------------------------

struct row {
    std::string recipe;
    long long sections = 0, overlaps = 0, lost = 0, fenced = 0, aborted = 0, tries = 0;
    int starved = 0;  // live workers that never completed a section
    bool stuck = false;
    double p50 = 0, p99 = 0, commands_per_section = 0;
};

redis::response sync_exec(std::uint16_t port, redis::request req)
{
    asio::io_context io;
    redis::config c;
    c.port = port;
    redis::connection conn(io.get_executor(), c);
    redis::response out;
    boost::system::error_code ec;
    conn.async_exec(req, [&](boost::system::error_code e, redis::response r) {
        ec = e;
        out = std::move(r);
        conn.close();
    });
    io.run();
    if (ec && ec != dlock::error::server_error)
        throw boost::system::system_error(ec, "redis");
    return out;
}

long long integer_of(std::uint16_t port, const std::string& key)
{
    redis::request r;
    r.push("GET", key);
    auto resp = sync_exec(port, std::move(r));
    return resp.empty() || resp[0].is_nil() ? 0 : std::stoll(resp[0].str);
}

long long commands_processed(std::uint16_t port)
{
    redis::request r;
    r.push("INFO", "stats");
    auto text = sync_exec(port, std::move(r))[0].str;
    auto at = text.find("total_commands_processed:");
    return at == std::string::npos ? 0 : std::stoll(text.substr(at + 25));
}

double quantile(std::vector<double> v, double q)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

row run_recipe(const std::string& self, const std::string& recipe, std::uint16_t lock_port, std::uint16_t res_port,
               int workers, int coroutines, milliseconds run)
{
    for (auto port : {lock_port, res_port}) {
        redis::request flush;
        flush.push("FLUSHALL");
        sync_exec(port, std::move(flush));
    }
    row out;
    out.recipe = recipe;
    auto before = commands_processed(lock_port);
    auto args = [&](int i, bool probe) {
        return std::vector<std::string>{self,
                                        "--worker",
                                        recipe,
                                        std::to_string(lock_port),
                                        std::to_string(res_port),
                                        std::to_string(i),
                                        std::to_string(coroutines),
                                        std::to_string(run.count()),
                                        probe ? "probe" : "run"};
    };
    std::vector<std::unique_ptr<dlock::test::child>> procs;
    for (int i = 0; i < workers; ++i)
        procs.push_back(std::make_unique<dlock::test::child>(args(i, false)));
    // The paused holder: worker 2 says when it is inside a section.
    std::vector<std::string> first_lines(static_cast<std::size_t>(workers));
    if (workers > 2) {
        auto line = procs[2]->read_line(run + 10s);
        if (line && *line == "inside") {
            procs[2]->signal(SIGSTOP);
            std::this_thread::sleep_for(2 * lease);  // the fault's length, not synchronisation
            procs[2]->signal(SIGCONT);
        } else if (line) {
            first_lines[2] = *line;
        }
    }
    std::vector<double> waits;
    for (int i = 0; i < workers; ++i) {
        auto& p = procs[static_cast<std::size_t>(i)];
        const auto& first = first_lines[static_cast<std::size_t>(i)];
        auto line = first.empty() ? p->read_line(run + 30s) : std::optional<std::string>(first);
        int status = p->wait(30s);
        if (i == 0)
            continue;  // the killed worker reports nothing
        if (!line || status != 0) {
            std::cerr << "pitfalls_lab: worker " << i << " of " << recipe << " failed (status " << status << ")\n";
            continue;
        }
        boost::system::error_code ec;
        auto v = boost::json::parse(*line, ec);
        if (ec || !v.is_object())
            continue;
        out.aborted += v.as_object()["aborted"].to_number<long long>();
        out.tries += v.as_object()["tries"].to_number<long long>();
        out.starved += v.as_object()["sections"].to_number<long long>() == 0;
        for (auto& x : v.as_object()["waits_ms"].as_array())
            waits.push_back(x.to_number<double>());
    }
    auto after = commands_processed(lock_port);
    out.sections = integer_of(res_port, "lab:writes");
    out.overlaps = integer_of(res_port, "lab:overlaps");
    out.fenced = integer_of(res_port, "lab:fenced");
    out.lost = out.sections - integer_of(res_port, "lab:counter");
    out.p50 = quantile(waits, 0.50);
    out.p99 = quantile(waits, 0.99);
    out.commands_per_section =
        out.sections ? static_cast<double>(after - before - 1) / static_cast<double>(out.sections) : 0;
    dlock::test::child probe(args(0, true));  // an unskewed clock
    auto verdict = probe.read_line(10s);
    probe.wait(10s);
    out.stuck = !verdict || *verdict != "free";
    return out;
}

void print_table(const std::vector<row>& rows)
{
    std::printf("%-24s %8s %8s %6s %6s %14s %8s %7s %9s %9s %9s\n", "recipe", "sections", "overlaps", "lost", "stuck",
                "fenced/aborted", "tries", "starved", "wait p50", "wait p99", "cmds/sect");
    for (auto& r : rows)
        std::printf("%-24s %8lld %8lld %6lld %6s %14s %8lld %7d %7.1fms %7.1fms %9.1f\n", r.recipe.c_str(), r.sections,
                    r.overlaps, r.lost, r.stuck ? "yes" : "no",
                    (std::to_string(r.fenced) + "/" + std::to_string(r.aborted)).c_str(), r.tries, r.starved, r.p50,
                    r.p99, r.commands_per_section);
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc == 9 && std::string(argv[1]) == "--worker") {
        worker_cfg cfg;
        cfg.recipe = argv[2];
        cfg.lock_port = static_cast<std::uint16_t>(std::stoi(argv[3]));
        cfg.res_port = static_cast<std::uint16_t>(std::stoi(argv[4]));
        cfg.index = std::stoi(argv[5]);
        cfg.coroutines = std::stoi(argv[6]);
        cfg.run = milliseconds(std::stoll(argv[7]));
        cfg.probe = std::string(argv[8]) == "probe";
        return run_worker(cfg);
    }
    bool json = false;
    int workers = 4, coroutines = 4;
    milliseconds run{4000};
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto number = [&](long lo, long hi) {
            long v = i + 1 < argc ? std::strtol(argv[++i], nullptr, 10) : 0;
            if (v < lo || v > hi) {
                std::cerr << "pitfalls_lab: " << a << " expects a number from " << lo << " to " << hi << "\n";
                std::exit(2);
            }
            return v;
        };
        if (a == "--json")
            json = true;
        else if (a == "--seconds")
            run = std::chrono::seconds(number(2, 600));
        else if (a == "--workers")
            workers = static_cast<int>(number(4, 32));
        else if (a == "--coroutines")
            coroutines = static_cast<int>(number(1, 100));
        else {
            std::cerr << "usage: pitfalls_lab [--json] [--seconds 4] [--workers 4] [--coroutines 4]\n";
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    try {
        dlock::test::redis_server lock_server, resource;
        std::vector<row> rows;
        for (auto* r : recipes)
            rows.push_back(
                run_recipe("/proc/self/exe", r, lock_server.port(), resource.port(), workers, coroutines, run));
        if (json) {
            for (auto& r : rows)
                std::cout << boost::json::serialize(
                                 boost::json::object{{"recipe", r.recipe},
                                                     {"sections", r.sections},
                                                     {"overlaps", r.overlaps},
                                                     {"lost_updates", r.lost},
                                                     {"stuck", r.stuck},
                                                     {"fenced", r.fenced},
                                                     {"aborted", r.aborted},
                                                     {"tries", r.tries},
                                                     {"starved", r.starved},
                                                     {"wait_p50_ms", r.p50},
                                                     {"wait_p99_ms", r.p99},
                                                     {"commands_per_section", r.commands_per_section}})
                          << "\n";
        } else {
            std::printf("pitfalls_lab: %d workers x %d coroutines, lease %lld ms, %lld s per recipe; faults: a "
                        "holder killed mid-protocol, a holder slower than its lease, clocks skewed by 3 s, a holder "
                        "paused for 2 leases\n\n",
                        workers, coroutines, static_cast<long long>(lease.count()),
                        static_cast<long long>(run.count() / 1000));
            print_table(rows);
        }
    } catch (const std::exception& e) {
        std::cerr << "pitfalls_lab: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
