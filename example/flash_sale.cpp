// SPDX-License-Identifier: BSL-1.0
/*
 * flash_sale: the classic distributed-lock demo, with real processes.
 *
 * Several worker processes, each with many coroutines ("buyers"), sell from a stock of
 * items kept in Redis, one lock per product. A sale is a read-modify-write: read the
 * stock, check the payment (a short pause), write the stock back minus one. Run twice:
 * with dlock around each sale, and without any lock, which oversells because buyers read
 * the same stock before either writes it back.
 *
 *   flash_sale                      starts a throwaway redis-server on a free loopback port
 *   flash_sale --url redis://h:p    uses yours (its "flash-sale:" stock keys are removed after;
 *                                   the never-expiring per-slot fencing counters
 *                                   "{T}dlock:fence" stay, as they must)
 *   flash_sale --workers 4 --buyers 50 --products 4 --stock 500 --work-us 200
 *
 * Exits 0 when the locked sale sold exactly the stock (oversold 0).
 */
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct settings {
    std::string url;
    int workers = 4;
    int buyers = 50;
    int products = 4;
    long stock = 500;
    int work_us = 200;
};

std::string stock_key(const std::string& mode, int product)
{
    return "flash-sale:" + mode + ":stock:" + std::to_string(product);
}

// ---- worker process: buyers in coroutines, one io_context ----------------------------

struct worker_result {
    long sold = 0;
    dlock::lock_stats stats;
};

asio::awaitable<long> get_stock(redis::connection& c, const std::string& key)
{
    redis::request req;
    req.push("GET", key);
    auto [ec, resp] = co_await c.async_exec(req, use_tuple);
    if (ec)
        throw boost::system::system_error(ec, "GET " + key);
    long v = 0;
    const auto& s = resp[0].str;
    std::from_chars(s.data(), s.data() + s.size(), v);
    co_return v;
}

asio::awaitable<void> buyer(int id, const settings& cfg, bool locked, dlock::registry& reg, redis::connection& conn,
                            long& sold)
{
    const std::string mode = locked ? "locked" : "unlocked";
    std::vector<bool> sold_out(static_cast<std::size_t>(cfg.products), false);
    int left = cfg.products;
    asio::steady_timer payment(co_await asio::this_coro::executor);
    for (int turn = id; left > 0; ++turn) {
        int p = turn % cfg.products;
        if (sold_out[static_cast<std::size_t>(p)])
            continue;
        dlock::guard g;
        if (locked)
            g = co_await reg.obtain("product:" + std::to_string(p)).acquire();
        long stock = co_await get_stock(conn, stock_key(mode, p));
        if (stock <= 0) {
            sold_out[static_cast<std::size_t>(p)] = true;
            --left;
        } else {
            payment.expires_after(std::chrono::microseconds(cfg.work_us));  // the payment check
            co_await payment.async_wait(use_tuple);
            redis::request req;
            req.push("SET", stock_key(mode, p), stock - 1);
            auto [ec, resp] = co_await conn.async_exec(req, use_tuple);
            if (ec)
                throw boost::system::system_error(ec, "SET");
            ++sold;
        }
        if (g)
            co_await g.release();
    }
}

int run_worker(const settings& cfg, bool locked)
{
    redis::config rc;
    redis::config_error err;
    if (!redis::parse_url(cfg.url, rc, err)) {
        std::cerr << "flash_sale worker: " << err.message << "\n";
        return 2;
    }
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), rc);
    dlock::registry reg(store, {.prefix = "flash-sale", .lease = 5s});
    long sold = 0;
    int running = cfg.buyers;
    std::exception_ptr failure;
    for (int b = 0; b < cfg.buyers; ++b)
        asio::co_spawn(io, buyer(b, cfg, locked, reg, store.connection(), sold), [&](std::exception_ptr e) {
            if (e && !failure)
                failure = e;
            if (--running == 0)
                store.close();
        });
    io.run();
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            std::cerr << "flash_sale worker: " << e.what() << "\n";
            return 1;
        }
    }
    const auto& s = reg.stats();
    boost::json::object out{{"sold", sold},   {"acquired", s.acquired},     {"handed_off", s.handed_off},
                            {"lost", s.lost}, {"wait_count", s.wait.count}, {"wait_max_us", s.wait.max_us}};
    boost::json::array buckets;
    for (auto b : s.wait.buckets)
        buckets.push_back(b);
    out["wait_buckets"] = std::move(buckets);
    std::cout << boost::json::serialize(out) << std::endl;
    return 0;
}

// ---- the sale: parent process -------------------------------------------------------

struct sale_result {
    long for_sale = 0;
    long sold = 0;
    double seconds = 0;
    dlock::histogram wait;
    std::uint64_t handed_off = 0, lost = 0;
    bool ok = true;
};

// Sets every product's stock (blocking helper over a short-lived io_context).
bool redis_do(const redis::config& rc, const redis::request& req, redis::response* out = nullptr)
{
    asio::io_context io;
    redis::connection c(io.get_executor(), rc);
    boost::system::error_code ec;
    c.async_exec(req, [&](boost::system::error_code e, redis::response r) {
        ec = e;
        if (out)
            *out = std::move(r);
        c.close();
    });
    io.run();
    if (ec)
        std::cerr << "flash_sale: redis: " << ec.message() << "\n";
    return !ec;
}

void show_progress(const std::string& label, long sold, long total, bool final_line)
{
    static const bool tty = ::isatty(2);
    if (!tty)
        return;
    std::fprintf(stderr, "\r  %-16s %6ld of %ld items sold%s", label.c_str(), sold, total, final_line ? "\n" : "");
    std::fflush(stderr);
}

sale_result run_sale(const settings& cfg, const redis::config& rc, bool locked, const std::string& self)
{
    const std::string mode = locked ? "locked" : "unlocked";
    sale_result r;
    r.for_sale = cfg.stock * cfg.products;
    redis::request init;
    for (int p = 0; p < cfg.products; ++p)
        init.push("SET", stock_key(mode, p), cfg.stock);
    if (!redis_do(rc, init)) {
        r.ok = false;
        return r;
    }
    auto start = clock_type::now();
    std::vector<std::unique_ptr<dlock::test::child>> workers;
    for (int w = 0; w < cfg.workers; ++w)
        workers.push_back(std::make_unique<dlock::test::child>(std::vector<std::string>{
            self, "--worker", mode, "--url", cfg.url, "--buyers", std::to_string(cfg.buyers), "--products",
            std::to_string(cfg.products), "--work-us", std::to_string(cfg.work_us)}));

    // Progress: the stock left, read every 200 ms while the workers run (display only).
    const std::string label = locked ? "with dlock" : "without a lock";
    for (auto deadline = start + 120s; clock_type::now() < deadline;) {
        redis::request q;
        for (int p = 0; p < cfg.products; ++p)
            q.push("GET", stock_key(mode, p));
        redis::response resp;
        if (redis_do(rc, q, &resp)) {
            long left = 0;
            for (const auto& v : resp)
                left += std::max(0L, std::atol(v.str.c_str()));
            show_progress(label, r.for_sale - left, r.for_sale, false);
            if (left == 0)
                break;
        }
        ::usleep(200'000);  // a display refresh, not synchronisation: the workers' exit is
    }
    for (auto& w : workers) {
        auto line = w->read_line(120s);
        int status = w->wait(30s);
        if (!line || status != 0) {
            std::cerr << "flash_sale: a worker failed (status " << status << ")\n";
            r.ok = false;
            continue;
        }
        boost::system::error_code jec;
        auto parsed = boost::json::parse(*line, jec);
        if (jec || !parsed.is_object()) {
            std::cerr << "flash_sale: a worker said something unexpected: " << *line << "\n";
            r.ok = false;
            continue;
        }
        auto& v = parsed.as_object();
        r.sold += v["sold"].as_int64();
        r.handed_off += v["handed_off"].to_number<std::uint64_t>();
        r.lost += v["lost"].to_number<std::uint64_t>();
        r.wait.count += v["wait_count"].to_number<std::uint64_t>();
        r.wait.max_us = std::max(r.wait.max_us, v["wait_max_us"].to_number<std::uint64_t>());
        const auto& b = v["wait_buckets"].as_array();
        for (std::size_t i = 0; i < b.size() && i < r.wait.buckets.size(); ++i)
            r.wait.buckets[i] += b[i].to_number<std::uint64_t>();
    }
    r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    show_progress(label, r.sold, r.for_sale, true);
    return r;
}

std::string ms(std::uint64_t us)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, us < 10'000 ? "%.2f ms" : "%.0f ms", static_cast<double>(us) / 1000.0);
    return buf;
}

void print_table(const sale_result& a, const sale_result& b)
{
    auto row = [](const char* what, const std::string& x, const std::string& y) {
        std::printf("  %-24s %16s %16s\n", what, x.c_str(), y.c_str());
    };
    auto n = [](long long v) { return std::to_string(v); };
    std::printf("\n");
    row("", "with dlock", "without a lock");
    row("items for sale", n(a.for_sale), n(b.for_sale));
    row("items sold", n(a.sold), n(b.sold));
    row("oversold", n(std::max(0L, a.sold - a.for_sale)), n(std::max(0L, b.sold - b.for_sale)));
    row("throughput (sales/s)", n(static_cast<long long>(static_cast<double>(a.sold) / a.seconds)),
        n(static_cast<long long>(static_cast<double>(b.sold) / b.seconds)));
    row("acquire wait p50", ms(a.wait.quantile_us(0.50)), "-");
    row("acquire wait p99", ms(a.wait.quantile_us(0.99)), "-");
    row("leases lost", n(static_cast<long long>(a.lost)), "-");
    row("local hand-offs", n(static_cast<long long>(a.handed_off)), "-");
    std::printf("\n");
}

bool parse_int(const char* flag, const char* text, long& out, long min, long max)
{
    auto end = text + std::char_traits<char>::length(text);
    auto [p, ec] = std::from_chars(text, end, out);
    if (ec != std::errc() || p != end || out < min || out > max) {
        std::cerr << "flash_sale: " << flag << " '" << text << "': expected a number from " << min << " to " << max
                  << "\n";
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv)
{
    settings cfg;
    std::optional<std::string> worker_mode;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::cout << "usage: flash_sale [--url URL] [--workers N] [--buyers N] [--products N] [--stock N] "
                         "[--work-us N]\n";
            return 0;
        }
        if (i + 1 >= argc) {
            std::cerr << "flash_sale: unknown or incomplete option '" << a << "' (try --help)\n";
            return 2;
        }
        const char* v = argv[++i];
        long n = 0;
        if (a == "--url")
            cfg.url = v;
        else if (a == "--worker")
            worker_mode = v;
        else if (a == "--workers" && parse_int("--workers", v, n, 1, 64))
            cfg.workers = static_cast<int>(n);
        else if (a == "--buyers" && parse_int("--buyers", v, n, 1, 10'000))
            cfg.buyers = static_cast<int>(n);
        else if (a == "--products" && parse_int("--products", v, n, 1, 1'000))
            cfg.products = static_cast<int>(n);
        else if (a == "--stock" && parse_int("--stock", v, n, 1, 10'000'000))
            cfg.stock = n;
        else if (a == "--work-us" && parse_int("--work-us", v, n, 0, 1'000'000))
            cfg.work_us = static_cast<int>(n);
        else {
            if (a != "--workers" && a != "--buyers" && a != "--products" && a != "--stock" && a != "--work-us")
                std::cerr << "flash_sale: unknown option '" << a << "' (try --help)\n";
            return 2;
        }
    }
    if (worker_mode)
        return run_worker(cfg, *worker_mode == "locked");

    // Zero configuration: a throwaway server on a free loopback port, gone when we exit.
    std::unique_ptr<dlock::test::redis_server> embedded;
    if (cfg.url.empty()) {
        embedded = std::make_unique<dlock::test::redis_server>();
        cfg.url = embedded->url();
    }
    redis::config rc;
    redis::config_error err;
    if (!redis::parse_url(cfg.url, rc, err)) {
        std::cerr << "flash_sale: --url: " << err.message << "\n";
        return 2;
    }
    std::printf("flash sale: %d workers x %d buyers, %d products x %ld items, one lock per product, at %s%s\n",
                cfg.workers, cfg.buyers, cfg.products, cfg.stock, redis::redact_url(cfg.url).c_str(),
                embedded ? " (throwaway server)" : "");
    std::fflush(stdout);
    std::string self = "/proc/self/exe";
    char path[4096];
    if (auto n = ::readlink("/proc/self/exe", path, sizeof path - 1); n > 0)
        self.assign(path, static_cast<std::size_t>(n));

    auto locked = run_sale(cfg, rc, true, self);
    auto unlocked = run_sale(cfg, rc, false, self);
    redis::request cleanup;
    for (int p = 0; p < cfg.products; ++p)
        cleanup.push("DEL", stock_key("locked", p), stock_key("unlocked", p));
    redis_do(rc, cleanup);
    if (!locked.ok || !unlocked.ok)
        return 1;
    print_table(locked, unlocked);
    long oversold = locked.sold - locked.for_sale;
    if (oversold != 0 || locked.sold != locked.for_sale) {
        std::printf("FAILED: the locked sale sold %ld of %ld items\n", locked.sold, locked.for_sale);
        return 1;
    }
    std::printf("With dlock every item was sold exactly once. Without a lock, buyers who read the same\n"
                "stock before either wrote it back sold %ld items that did not exist.\n",
                std::max(0L, unlocked.sold - unlocked.for_sale));
    return 0;
}
