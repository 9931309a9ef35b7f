// SPDX-License-Identifier: BSL-1.0
// redis_store on a throwaway redis-server as a contract subject, with a second client of
// the same server for the checks across clients.
#include <dlock/redis/store.hpp>

#include "common/redis_server.hpp"
#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    auto srv = std::make_shared<redis_server>();
    auto st = std::make_unique<dlock::redis_store>(io.get_executor(), srv->config());
    auto other = std::make_unique<dlock::redis_store>(io.get_executor(), srv->config());
    auto* raw = st.get();
    auto* raw_other = other.get();
    contract_subject s{srv, std::move(st), [raw, raw_other] {
                           raw->close();
                           raw_other->close();
                       }};
    s.other = std::move(other);
    s.keys_of = [srv = srv.get()](const std::string& name) { return srv->keys("*:" + name); };
    return s;
}

}  // namespace dlock::test
