// SPDX-License-Identifier: BSL-1.0
// What a backend gives the contract suite: a store on the test's io_context, the servers it
// started (kept alive for the test), and how to close it.
#pragma once

#include <dlock/store.hpp>

#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dlock::test {

struct contract_subject {
    std::shared_ptr<void> servers;  // whatever the store needs running; stopped when freed
    std::unique_ptr<dlock::store> store;
    std::function<void()> stop;  // closes the store (and `other`) at the end of the suite
    /// Another store on the same servers (its own session or connections), for scenarios
    /// between two clients; empty: they use a second registry on `store`.
    std::function<std::unique_ptr<dlock::store>()> another{};
    /// A second client of the same server(s), for the checks across clients (null: `store`
    /// plays both). It may serve other kinds than `store` (a scripting client beside one without).
    std::unique_ptr<dlock::store> other{};
    /// The server's keys of a lock name (empty: the store cannot list them).
    std::function<std::vector<std::string>(const std::string& name)> keys_of{};
};

/// Implemented once per backend, in the source given to dlock_add_contract_test().
contract_subject make_contract_subject(boost::asio::io_context& io);

}  // namespace dlock::test
