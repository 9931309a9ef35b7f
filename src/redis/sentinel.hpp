// SPDX-License-Identifier: BSL-1.0
// Sentinel discovery: ask the sentinels where the master is (one step of a connect attempt).
#pragma once

#include <dlock/redis/config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <string>

namespace dlock::redis::detail {

/// Asks cfg.sentinel.nodes in order for the address of cfg.sentinel.master_name and writes
/// it to cfg.host / cfg.port; the sentinel that answered moves to the front (the Sentinel
/// client guidelines). Each sentinel gets cfg.connect_timeout. Errors: auth_failed if a
/// sentinel refused our AUTH, else resolve_failed when no sentinel answered with an
/// address (`message` says what each one said or why it could not be asked).
boost::asio::awaitable<boost::system::error_code> discover_master(boost::asio::any_io_executor ex, config& cfg,
                                                                  std::string& message);

}  // namespace dlock::redis::detail
