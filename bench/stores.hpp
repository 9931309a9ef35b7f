// SPDX-License-Identifier: BSL-1.0
// The stores a bench can run on, one row each: its name, the throwaway servers it starts
// (through test/common) and how to make a store on them. Stores not built are not listed.
#pragma once

#include <dlock/dlock.hpp>
#ifdef DLOCK_HAS_ETCD
#include <dlock/etcd.hpp>

#include "common/etcd_cluster.hpp"
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
#include <dlock/zookeeper.hpp>

#include "common/zk_ensemble.hpp"
#endif
#ifdef DLOCK_HAS_POSTGRES
#include <dlock/postgres.hpp>

#include "common/postgres_server.hpp"
#endif
#ifdef DLOCK_HAS_MARIADB
#include <dlock/mariadb.hpp>

#include "common/mariadb_server.hpp"
#endif

#include "common/redis_cluster.hpp"
#include "common/redis_server.hpp"

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

/// Makes one store on the site's servers, on `io` (no I/O until its first operation).
using store_factory = std::function<std::unique_ptr<dlock::store>(boost::asio::io_context&)>;

/// One store's running servers and its factory; the servers stop when the site goes.
struct store_site {
    std::shared_ptr<void> servers{};
    store_factory make{};
    /// The single redis-server's port (the PING floor); 0 for every other store.
    std::uint16_t redis_port = 0;
};

/// A store a bench can run on: its name (--store NAME, the cases' prefix) and how to start it.
struct store_row {
    const char* name;
    store_site (*start)();
};

inline store_site start_redis()
{
    auto srv = std::make_shared<dlock::test::redis_server>();
    auto cfg = srv->config();
    return {srv,
            [cfg](boost::asio::io_context& io) { return std::make_unique<dlock::redis_store>(io.get_executor(), cfg); },
            srv->port()};
}

inline store_site start_cluster()
{
    auto cluster = std::make_shared<dlock::test::redis_cluster>();
    auto seeds = cluster->seeds();
    return {cluster, [seeds](boost::asio::io_context& io) {
                return std::make_unique<dlock::cluster_store>(io.get_executor(), seeds);
            }};
}

#ifdef DLOCK_HAS_ETCD
inline store_site start_etcd()
{
    auto cluster = std::make_shared<dlock::test::etcd_cluster>();
    dlock::etcd::config cfg;
    dlock::etcd::config_error err;
    if (!dlock::etcd::parse_url(cluster->url(), cfg, err))
        throw std::runtime_error(err.message);
    return {cluster,
            [cfg](boost::asio::io_context& io) { return std::make_unique<dlock::etcd_store>(io.get_executor(), cfg); }};
}
#endif

#ifdef DLOCK_HAS_ZOOKEEPER
inline store_site start_zookeeper()
{
    auto ensemble = std::make_shared<dlock::test::zk_ensemble>();
    dlock::zookeeper::config cfg;
    dlock::zookeeper::config_error err;
    if (!dlock::zookeeper::parse_url(ensemble->url("?session_timeout=5s"), cfg, err))
        throw std::runtime_error(err.message);
    return {ensemble, [cfg](boost::asio::io_context& io) {
                return std::make_unique<dlock::zookeeper_store>(io.get_executor(), cfg);
            }};
}
#endif

#ifdef DLOCK_HAS_POSTGRES
inline store_site start_postgres()
{
    auto srv = std::make_shared<dlock::test::postgres_server>();
    auto cfg = srv->config();
    return {srv, [cfg](boost::asio::io_context& io) {
                return std::make_unique<dlock::postgres_store>(io.get_executor(), cfg);
            }};
}
#endif

#ifdef DLOCK_HAS_MARIADB
inline store_site start_mariadb()
{
    auto srv = std::make_shared<dlock::test::mariadb_server>();
    auto cfg = srv->config();
    return {srv, [cfg](boost::asio::io_context& io) {
                return std::make_unique<dlock::mariadb_store>(io.get_executor(), cfg);
            }};
}
#endif

/// Every store built, in the order the benches run them.
inline const std::vector<store_row>& stores_built()
{
    static const std::vector<store_row> rows{
        {"redis", start_redis},         {"cluster", start_cluster},
#ifdef DLOCK_HAS_ETCD
        {"etcd", start_etcd},
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
        {"zookeeper", start_zookeeper},
#endif
#ifdef DLOCK_HAS_POSTGRES
        {"postgres", start_postgres},
#endif
#ifdef DLOCK_HAS_MARIADB
        {"mariadb", start_mariadb},
#endif
    };
    return rows;
}

/// Whether `name` is one of stores_built().
inline bool is_built(const std::string& name)
{
    for (const auto& r : stores_built())
        if (name == r.name)
            return true;
    return false;
}

/// The names of stores_built(), joined with `sep` (usage lines).
inline std::string store_names(const char* sep = "|")
{
    std::string out;
    for (const auto& r : stores_built())
        out += (out.empty() ? "" : sep) + std::string(r.name);
    return out;
}

}  // namespace bench
