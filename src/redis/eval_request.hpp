// SPDX-License-Identifier: BSL-1.0
// One script call as RESP: EVALSHA (or EVAL) with its numkeys/keys/args tail, ASKING in
// front when a cluster redirect says so, and the EVAL that replaces it after NOSCRIPT.
#pragma once

#include <dlock/redis/reply.hpp>
#include <dlock/redis/request.hpp>
#include <dlock/redis/script.hpp>

#include <boost/system/error_code.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dlock::redis::detail {

/// The request for one script call, kept so the NOSCRIPT fallback can be built without
/// copying the keys and arguments again. Shared by connection::async_eval and the cluster's
/// ASKING path.
class eval_request {
public:
    /// `asking`: send ASKING first (it applies to the next command only), for an ASK redirect.
    eval_request(const script& s, std::span<const std::string> keys, std::span<const std::string> args,
                 bool asking = false);

    /// The first attempt: EVAL when `load` (it also caches the script), else EVALSHA.
    request first(bool load);
    /// The attempt after a NOSCRIPT refusal: EVAL with the body.
    request reload() { return build(true); }

    /// The script's own reply out of the response, and the error code for that reply alone
    /// (an ASKING that succeeded does not make a good script reply a server error).
    std::pair<boost::system::error_code, reply> take_reply(boost::system::error_code ec, response& r) const;

private:
    request build(bool by_body);

    std::shared_ptr<const std::string> body_;
    std::array<char, 40> sha1_{};  // hex, as EVALSHA wants it
    std::string tail_;             // numkeys, keys..., args..., RESP-encoded once
    std::size_t nargs_;            // of the whole command: EVAL(SHA), sha1 or body, then the tail's
    bool asking_;
};

/// Did the server refuse a script call because it does not have the script (after a
/// restart, a failover or SCRIPT FLUSH)?
bool is_noscript(const boost::system::error_code& ec, const reply& r) noexcept;

}  // namespace dlock::redis::detail
