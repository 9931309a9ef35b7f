// SPDX-License-Identifier: BSL-1.0
// mariadb_store on a throwaway MariaDB as a contract subject (no exceptions: per lease,
// millisecond leases on the server's clock, release notifications through GET_LOCK, durable fencing).
#include <dlock/mariadb/store.hpp>

#include "common/mariadb_server.hpp"
#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    auto srv = std::make_shared<mariadb_server>();
    auto st = std::make_unique<dlock::mariadb_store>(io.get_executor(), srv->config());
    auto* raw = st.get();
    return {srv, std::move(st), [raw] { raw->close(); }};
}

}  // namespace dlock::test
