// SPDX-License-Identifier: BSL-1.0
// postgres_store on a throwaway PostgreSQL as a contract subject (no exceptions: per lease,
// millisecond leases on the server's clock, release notifications, durable fencing).
#include <dlock/postgres/store.hpp>

#include "common/postgres_server.hpp"
#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    auto srv = std::make_shared<postgres_server>();
    auto st = std::make_unique<dlock::postgres_store>(io.get_executor(), srv->config());
    auto* raw = st.get();
    return {srv, std::move(st), [raw] { raw->close(); }};
}

}  // namespace dlock::test
