// SPDX-License-Identifier: BSL-1.0
// zookeeper_store on a throwaway 3-server ZooKeeper ensemble as a contract subject.
#include <dlock/zookeeper/store.hpp>

#include "common/zk_ensemble.hpp"
#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    auto ensemble = std::make_shared<zk_ensemble>();
    dlock::zookeeper::config cfg;
    dlock::zookeeper::config_error err;
    if (!dlock::zookeeper::parse_url(ensemble->url("?session_timeout=4s"), cfg, err))
        throw std::runtime_error(err.message);
    auto st = std::make_unique<dlock::zookeeper_store>(io.get_executor(), cfg);
    auto* raw = st.get();
    auto another = [&io, cfg] { return std::make_unique<dlock::zookeeper_store>(io.get_executor(), cfg); };
    return {ensemble, std::move(st), [raw] { raw->close(); }, another};
}

}  // namespace dlock::test
