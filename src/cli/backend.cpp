// SPDX-License-Identifier: BSL-1.0
#include "cli/backend.hpp"

#ifdef DLOCK_HAS_ETCD
#include <dlock/etcd/store.hpp>
#endif
#ifdef DLOCK_HAS_MARIADB
#include <dlock/mariadb/store.hpp>
#endif
#ifdef DLOCK_HAS_MEMCACHED
#include <dlock/memcached/store.hpp>
#endif
#ifdef DLOCK_HAS_POSTGRES
#include <dlock/postgres/store.hpp>
#endif
#include <dlock/redis/cluster_store.hpp>
#include <dlock/redis/redlock_store.hpp>
#include <dlock/redis/store.hpp>
#ifdef DLOCK_HAS_ZOOKEEPER
#include <dlock/zookeeper/store.hpp>
#endif

#include <array>
#include <utility>

namespace dlock::cli {

namespace {

using factory = std::unique_ptr<store> (*)(const options&, boost::asio::any_io_executor);

// One row per topology: how to build its store from the server list.
constexpr std::pair<topology, factory> stores[] = {
    {topology::single,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<redis_store>(ex, o.servers.front(), redis_store_options{.scripting = o.scripting});
     }},
    {topology::redlock,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<redlock_store>(ex, o.servers);
     }},
    {topology::cluster,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<cluster_store>(ex, o.servers);
     }},
#ifdef DLOCK_HAS_ETCD
    {topology::etcd,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<etcd_store>(ex, o.etcd);
     }},
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
    {topology::zookeeper,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<zookeeper_store>(ex, o.zookeeper);
     }},
#endif
#ifdef DLOCK_HAS_MEMCACHED
    {topology::memcached,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<memcached_store>(ex, o.memcached);
     }},
#endif
#ifdef DLOCK_HAS_POSTGRES
    {topology::postgres,
     [](const options& o, boost::asio::any_io_executor ex)
         -> std::unique_ptr<store> { return std::make_unique<postgres_store>(ex, o.postgres); }},
#endif
#ifdef DLOCK_HAS_MARIADB
    {topology::mariadb,
     [](const options& o, boost::asio::any_io_executor ex)
         -> std::unique_ptr<store> { return std::make_unique<mariadb_store>(ex, o.mariadb); }},
#endif
};

}  // namespace

std::unique_ptr<store> open_store(const options& o, boost::asio::any_io_executor ex)
{
    for (const auto& [t, make] : stores)
        if (t == o.topology)
            return make(o, std::move(ex));
    return nullptr;
}

}  // namespace dlock::cli
