// SPDX-License-Identifier: BSL-1.0
// memcached_store on a throwaway memcached as a contract subject. Its documented
// exceptions, keyed on its traits in the suite: whole-second leases (the expiry check uses
// the 2 s minimum and allows a second of clock granularity), no release notifications.
#include <dlock/memcached/store.hpp>

#include "common/memcached_server.hpp"
#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    auto srv = std::make_shared<memcached_server>();
    auto st = std::make_unique<dlock::memcached_store>(io.get_executor(), srv->config());
    auto* raw = st.get();
    return {srv, std::move(st), [raw] { raw->close(); }};
}

}  // namespace dlock::test
