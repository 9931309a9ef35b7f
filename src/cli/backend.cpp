#include "cli/backend.hpp"

#include <dlock/etcd/store.hpp>
#include <dlock/memcached/store.hpp>
#include <dlock/redis/cluster_store.hpp>
#include <dlock/redis/redlock_store.hpp>
#include <dlock/redis/store.hpp>

#include <array>
#include <utility>

namespace dlock::cli {

namespace {

using factory = std::unique_ptr<store> (*)(const options&, boost::asio::any_io_executor);

// One row per topology: how to build its store from the server list.
constexpr std::array<std::pair<topology, factory>, 5> stores{{
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
    {topology::etcd,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<etcd_store>(ex, o.etcd);
     }},
    {topology::memcached,
     [](const options& o, boost::asio::any_io_executor ex) -> std::unique_ptr<store> {
         return std::make_unique<memcached_store>(ex, o.memcached);
     }},
}};

}  // namespace

std::unique_ptr<store> open_store(const options& o, boost::asio::any_io_executor ex)
{
    for (const auto& [t, make] : stores)
        if (t == o.topology)
            return make(o, std::move(ex));
    return nullptr;
}

}  // namespace dlock::cli
