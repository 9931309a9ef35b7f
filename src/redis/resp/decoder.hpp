// SPDX-License-Identifier: BSL-1.0
// Sans-io RESP decoder: bytes in, replies out, through hiredis's redisReader.
#pragma once

#include <dlock/redis/reply.hpp>

#include <boost/system/error_code.hpp>

#include <memory>
#include <optional>
#include <string_view>

struct redisReader;

namespace dlock::resp {

/// Feeds bytes in any split; yields whole replies in order. After a protocol error the
/// decoder is unusable until reset(): the stream position is lost.
class decoder {
public:
    decoder();
    ~decoder();
    decoder(const decoder&) = delete;
    decoder& operator=(const decoder&) = delete;

    /// Appends received bytes.
    void feed(std::string_view bytes);

    /// The next complete reply, std::nullopt if more bytes are needed; `ec` is set to
    /// error::protocol_error on malformed input.
    std::optional<redis::reply> next(boost::system::error_code& ec);

    /// Drops buffered bytes and any error (after a reconnect).
    void reset();

private:
    redisReader* reader_;
    std::unique_ptr<redis::reply> spare_;  // the last reply's root object, for the next one
};

}  // namespace dlock::resp
