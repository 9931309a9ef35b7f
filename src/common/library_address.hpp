// SPDX-License-Identifier: BSL-1.0
// The address a C client library (libpq, MariaDB Connector/C) is given to connect to,
// resolved here on the io_context: the library would resolve a name with a blocking
// getaddrinfo(). Header-only: each SQL backend's connection includes it.
#pragma once

#include <dlock/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <string>

namespace dlock::detail {

/// `host` as a numeric address into `address` (a literal one as it is); resolve_failed with
/// the reason in `why` if the name does not resolve.
inline boost::asio::awaitable<boost::system::error_code> library_address(boost::asio::any_io_executor ex,
                                                                         std::string host, std::uint16_t port,
                                                                         std::string& address, std::string& why)
{
    boost::system::error_code aec;
    auto addr = boost::asio::ip::make_address(host, aec);
    if (!aec) {
        address = addr.to_string();
        co_return boost::system::error_code();
    }
    boost::asio::ip::tcp::resolver resolver(ex);
    auto [rec, eps] =
        co_await resolver.async_resolve(host, std::to_string(port), boost::asio::as_tuple(boost::asio::use_awaitable));
    if (rec || eps.empty()) {
        why = "could not resolve " + host + ": " + rec.message();
        co_return error::resolve_failed;
    }
    address = eps.begin()->endpoint().address().to_string();
    co_return boost::system::error_code();
}

}  // namespace dlock::detail
