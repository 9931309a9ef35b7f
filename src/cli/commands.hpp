// SPDX-License-Identifier: BSL-1.0
// The dlock tool's commands, each one coroutine on the tool's io_context.
#pragma once

#include "cli/backend.hpp"
#include "cli/options.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>

namespace dlock::cli {

/// `dlock run`: acquire, supervise the command, release. Returns the exit status.
boost::asio::awaitable<int> run_command(const options& o, store& st);
/// `dlock elect`: campaign, supervise the command while leading, resign; or --observe.
boost::asio::awaitable<int> elect_command(const options& o, store& st);
/// `dlock status`.
boost::asio::awaitable<int> status_command(const options& o, store& st);
/// `dlock release --force`.
boost::asio::awaitable<int> release_command(const options& o, store& st);

/// Connects once; on failure prints why on stderr and returns exit_status::unavailable.
boost::asio::awaitable<int> connect_or_explain(const options& o, store& st);
/// The lock's name as the store sees it (the registry's "prefix:name").
std::string store_name(const options& o);

}  // namespace dlock::cli
