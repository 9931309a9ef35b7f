// SPDX-License-Identifier: BSL-1.0
// README.md's store x primitive x guarantee table, made from what each store says of itself:
// traits() (kinds, hand-off, notifications, liveness, loss, fencing, lease lengths), and, for
// latches and elections, whether the store hands out their interfaces (store::latches(),
// store::elections()).
//   dlock_store_table            prints the table (paste it between the README's markers)
//   dlock_store_table README.md  exit 1, with the differences, if the README's table is not it
// Builds each store on an address nobody listens on: nothing here needs a server.
#include <dlock/dlock.hpp>
#include <dlock/etcd.hpp>
#include <dlock/mariadb.hpp>
#include <dlock/memcached.hpp>
#include <dlock/postgres.hpp>
#include <dlock/zookeeper.hpp>

#include <boost/asio/io_context.hpp>

#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace asio = boost::asio;

namespace {

const std::string begin_mark = "<!-- store table: made by test/readme/store_table.cpp from the stores' traits(); "
                               "ctest readme_store_table checks it -->";
const std::string end_mark = "<!-- end of store table -->";

template <class Config, class Error>
Config parsed(bool (*parse)(std::string_view, Config&, Error&), std::string_view url)
{
    Config cfg;
    Error err;
    if (!parse(url, cfg, err))
        throw std::runtime_error("store_table: " + err.message);
    return cfg;
}

using factory = std::function<std::unique_ptr<dlock::store>(asio::any_io_executor)>;

struct row {
    std::string label;
    factory make;
};

std::vector<row> rows()
{
    auto redis = [] { return parsed(dlock::redis::parse_url, "redis://127.0.0.1:1"); };
    return {
        {"`redis_store` (one node, Sentinel)",
         [=](auto ex) { return std::make_unique<dlock::redis_store>(ex, redis()); }},
        {"`redis_store` with `wait_replicas`",
         [=](auto ex) {
             return std::make_unique<dlock::redis_store>(ex, redis(), dlock::redis_store_options{.wait_replicas = 1});
         }},
        {"`redis_store` without scripting",
         [=](auto ex) {
             return std::make_unique<dlock::redis_store>(ex, redis(), dlock::redis_store_options{.scripting = false});
         }},
        {"`cluster_store`", [=](auto ex) { return std::make_unique<dlock::cluster_store>(ex, redis()); }},
        {"`redlock_store`",
         [=](auto ex) {
             return std::make_unique<dlock::redlock_store>(
                 ex, std::vector<dlock::redis::config>{redis(), redis(), redis()});
         }},
        {"`etcd_store`",
         [](auto ex) {
             return std::make_unique<dlock::etcd_store>(ex, parsed(dlock::etcd::parse_url, "etcd://127.0.0.1:1"));
         }},
        {"`zookeeper_store`",
         [](auto ex) {
             return std::make_unique<dlock::zookeeper_store>(ex,
                                                             parsed(dlock::zookeeper::parse_url, "zk://127.0.0.1:1"));
         }},
        {"`postgres_store`",
         [](auto ex) {
             return std::make_unique<dlock::postgres_store>(
                 ex, parsed(dlock::postgres::parse_url, "postgresql://u@127.0.0.1:1/db"));
         }},
        {"`mariadb_store`",
         [](auto ex) {
             return std::make_unique<dlock::mariadb_store>(
                 ex, parsed(dlock::mariadb::parse_url, "mariadb://u@127.0.0.1:1/db"));
         }},
        {"`memcached_store`",
         [](auto ex) {
             return std::make_unique<dlock::memcached_store>(
                 ex, parsed(dlock::memcached::parse_url, "memcached://127.0.0.1:1"));
         }},
        {"`memory_store` (one process: tests)", [](auto ex) { return std::make_unique<dlock::memory_store>(ex); }},
    };
}

const char* yes(bool b)
{
    return b ? "yes" : "no";
}

bool serves(const dlock::store_traits& t, dlock::lease_kind k)
{
    return (t.kinds & static_cast<unsigned>(k)) != 0;
}

// Whole seconds or any number of milliseconds, and the shortest lease.
std::string lease_lengths(const dlock::store_traits& t)
{
    using namespace std::chrono;
    if (t.ttl_granularity == milliseconds(1))
        return t.min_ttl == milliseconds(1) ? "any, in ms" : "at least " + std::to_string(t.min_ttl.count()) + " ms";
    if (t.ttl_granularity == seconds(1) && t.min_ttl % seconds(1) == milliseconds(0))
        return "whole seconds, at least " + std::to_string(duration_cast<seconds>(t.min_ttl).count()) + " s";
    return "multiples of " + std::to_string(t.ttl_granularity.count()) + " ms, at least " +
           std::to_string(t.min_ttl.count()) + " ms";
}

std::string waiter(const dlock::store_traits& t)
{
    if (t.direct_handoff)
        return "handed the lock by the release, in queue order";
    if (t.release_notifications)
        return "woken by the release, then retries";
    return "sleeps until the holder's lease ends, then retries";
}

std::string table()
{
    std::ostringstream out;
    out << "| store | mutex | read-write lock | semaphore | latch | election | a waiter in another process "
           "| a lease lives | a holder learns of its loss | fencing tokens after a store restart | lease lengths |\n"
        << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (auto& r : rows()) {
        asio::io_context io;
        auto s = r.make(io.get_executor());
        const auto t = s->traits();
        // Latches and elections: the interfaces the store hands out.
        bool latch = s->latches() != nullptr, election = s->elections() != nullptr;
        s->close();
        io.poll();
        out << "| " << r.label << " | " << yes(serves(t, dlock::lease_kind::mutex)) << " | "
            << yes(serves(t, dlock::lease_kind::read) && serves(t, dlock::lease_kind::write)) << " | "
            << yes(serves(t, dlock::lease_kind::permit)) << " | " << yes(latch) << " | " << yes(election) << " | "
            << waiter(t) << " | "
            << (t.live == dlock::liveness::per_session ? "as long as the store's session" : "on its own, renewed")
            << " | " << (t.bounded_loss ? "by its lease's end" : "at its next round trip") << " | "
            << (t.durable_fencing ? "still increase" : "can repeat") << " | " << lease_lengths(t) << " |\n";
    }
    return out.str();
}

// The README's lines between the marks; false if a mark is missing.
bool readme_table(const std::string& path, std::string& text)
{
    std::ifstream in(path);
    std::string line;
    bool inside = false, closed = false;
    while (std::getline(in, line)) {
        if (line == begin_mark)
            inside = true;
        else if (line == end_mark && inside) {
            closed = true;
            break;
        } else if (inside)
            text += line + "\n";
    }
    return closed;
}

}  // namespace

int main(int argc, char** argv)
{
    const auto expected = table();
    if (argc < 2) {
        std::cout << expected;
        return 0;
    }
    std::string found;
    if (!readme_table(argv[1], found)) {
        std::cerr << argv[1] << ": no store table between the lines\n  " << begin_mark << "\n  " << end_mark << '\n';
        return 1;
    }
    if (found == expected) {
        std::cout << argv[1] << ": the store table agrees with the stores' traits()\n";
        return 0;
    }
    std::istringstream want(expected), have(found);
    std::string w, h;
    for (int n = 1;; ++n) {
        const bool more_w = static_cast<bool>(std::getline(want, w));
        const bool more_h = static_cast<bool>(std::getline(have, h));
        if (!more_w && !more_h)
            break;
        if (w != h || more_w != more_h)
            std::cerr << "table line " << n << ":\n  README:    " << (more_h ? h : "(none)")
                      << "\n  traits(): " << (more_w ? w : "(none)") << '\n';
    }
    std::cerr << argv[1] << ": the store table disagrees with the stores' traits(); the table they give:\n"
              << begin_mark << '\n'
              << expected << end_mark << '\n';
    return 1;
}
