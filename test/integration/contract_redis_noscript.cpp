// SPDX-License-Identifier: BSL-1.0
// redis_store in the no-scripting mode (WATCH/MULTI/EXEC), as a user without @scripting,
// as a contract subject; beside it a scripting client of the same server takes the
// read-write locks and semaphores of the checks across clients.
#include <dlock/redis/store.hpp>

#include "common/redis_server.hpp"
#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    auto srv = std::make_shared<redis_server>();
    srv->cli({"ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-@scripting"});
    auto cfg = srv->config();
    cfg.username = "noscript";
    cfg.password = "pw";
    auto st = std::make_unique<dlock::redis_store>(io.get_executor(), cfg, redis_store_options{.scripting = false});
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
