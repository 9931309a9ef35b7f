// SPDX-License-Identifier: BSL-1.0
// The memory store (with direct hand-off) as a contract subject.
#include <dlock/memory_store.hpp>

#include "integration/contract_subject.hpp"

namespace dlock::test {

contract_subject make_contract_subject(boost::asio::io_context& io)
{
    return {nullptr, std::make_unique<dlock::memory_store>(io.get_executor(), true), {}};
}

}  // namespace dlock::test
