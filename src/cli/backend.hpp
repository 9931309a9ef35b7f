// SPDX-License-Identifier: BSL-1.0
// The store the dlock tool talks to: one Redis (direct or through Sentinel), Redlock over a
// list of masters, or a Redis Cluster. The tool uses only the store contract.
#pragma once

#include <dlock/store.hpp>

#include "cli/options.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace dlock::cli {

/// The store of the options' topology over o.servers; no I/O until first used.
std::unique_ptr<store> open_store(const options& o, boost::asio::any_io_executor ex);

}  // namespace dlock::cli
