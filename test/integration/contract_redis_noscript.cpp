// SPDX-License-Identifier: BSL-1.0
// redis_store in the no-scripting mode (WATCH/MULTI/EXEC), as a user without @scripting,
// as a contract subject.
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
    auto* raw = st.get();
    return {srv, std::move(st), [raw] { raw->close(); }};
}

}  // namespace dlock::test
