// SPDX-License-Identifier: BSL-1.0
// The SQL stores' (PostgreSQL, MariaDB) one step after each statement, written once: the
// statement's result is decoded into the operation's, a result that does not decode is a
// protocol_error, an error keeps the store's own words as the store's error text, and the
// caller's handler is completed through the store's executor.
#pragma once

#include <dlock/error.hpp>

#include "common/post_completion.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <optional>
#include <string>
#include <utility>

namespace dlock::detail {

/// A completion handler for a connection's exec(): `decode(result, out)` reads the rows into
/// `out` (false: they are not what the statement returns), `value(ec, out)` is what the
/// caller's handler `h` gets after the error code; `keep(text)` keeps the store's words.
template <class Out, class Result, class Keep, class Decode, class Value, class Handler>
auto sql_reply(boost::asio::any_io_executor ex, Keep keep, Decode decode, Value value, Handler h)
{
    return [ex = std::move(ex), keep = std::move(keep), decode = std::move(decode), value = std::move(value),
            h = std::move(h)](boost::system::error_code ec, Result res) mutable {
        Out out{};
        if (!ec && !decode(res, out))
            ec = error::protocol_error;
        if (ec && !res.message.empty())
            keep(res.message);
        post_completion(ex, std::move(h), ec, value(ec, out));
    };
}

/// A SQL connection's request the pipe ended (empty: gone already): its handler gets `ec` and
/// the result; a request the pipe refused gets the refused config's text as the message.
template <class Request>
void complete_request(const boost::asio::any_io_executor& ex, std::optional<Request> r, boost::system::error_code ec,
                      const std::string& refused)
{
    if (!r)
        return;
    if (ec == error::invalid_option)
        r->res.message = refused;
    post_completion(ex, std::move(r->h), ec, std::move(r->res));
}

/// `value` for most: the decoded result, or an empty one on an error.
inline constexpr auto empty_on_error = [](boost::system::error_code ec, auto& out) {
    return ec ? std::decay_t<decltype(out)>{} : std::move(out);
};

}  // namespace dlock::detail
