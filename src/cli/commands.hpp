// The dlock tool's commands, each one coroutine on the tool's io_context.
#pragma once

#include "cli/options.hpp"

#include <dlock/redis_store.hpp>

#include <boost/asio/awaitable.hpp>

#include <string>

namespace dlock::cli {

/// `dlock run`: acquire, supervise the command, release. Returns the exit status.
boost::asio::awaitable<int> run_command(const options& o, redis_store& st);
/// `dlock status`.
boost::asio::awaitable<int> status_command(const options& o, redis_store& st);
/// `dlock release --force`.
boost::asio::awaitable<int> release_command(const options& o, redis_store& st);

/// Connects once; on failure prints why on stderr and returns exit_status::unavailable.
boost::asio::awaitable<int> connect_or_explain(const options& o, redis_store& st);
/// The lock's name as the store sees it (the registry's "prefix:name").
std::string store_name(const options& o);
/// The server, for messages: host:port or the socket path, never the password.
std::string describe_server(const redis::config& c);

}  // namespace dlock::cli
