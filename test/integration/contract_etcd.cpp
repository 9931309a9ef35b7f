// SPDX-License-Identifier: BSL-1.0
// etcd_store on a throwaway 3-member etcd cluster as a contract subject.
#include <dlock/etcd/store.hpp>

#include "common/etcd_cluster.hpp"
#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    auto cluster = std::make_shared<etcd_cluster>();
    dlock::etcd::config cfg;
    dlock::etcd::config_error err;
    if (!dlock::etcd::parse_url(cluster->url(), cfg, err))
        throw std::runtime_error(err.message);
    auto st = std::make_unique<dlock::etcd_store>(io.get_executor(), cfg);
    auto* raw = st.get();
    auto another = [&io, cfg] { return std::make_unique<dlock::etcd_store>(io.get_executor(), cfg); };
    return {cluster, std::move(st), [raw] { raw->close(); }, another};
}

}  // namespace dlock::test
