// SPDX-License-Identifier: BSL-1.0
// Sans-io: memcached's meta text protocol (mg, ms, md, ma, mn) as dlock uses it. Commands
// are encoded to bytes; replies are parsed from bytes as they arrive. No sockets here.
#pragma once

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::memcached::proto {

/// memcached's key limit (bytes, after base64 decoding).
inline constexpr std::size_t max_key = 250;

/// A key as it goes on the wire: as is if it is printable ASCII without spaces, else
/// base64 with the `b` flag. Empty if the key is longer than max_key.
struct wire_key {
    std::string text;
    bool base64 = false;
};
wire_key encode_key(std::string_view key);

/// One command's bytes. `flags` are meta flags without the leading space ("v c t", "T5 ME").
std::string mg(const wire_key& key, std::string_view flags);
std::string ms(const wire_key& key, std::string_view data, std::string_view flags);
std::string md(const wire_key& key, std::string_view flags);
std::string ma(const wire_key& key, std::string_view flags);
std::string mn();

/// One reply.
struct reply {
    enum class kind {
        va,            ///< a value: `data` holds it
        hd,            ///< success, no value
        ns,            ///< not stored (add found the key; ma's conditions)
        ex,            ///< CAS mismatch
        nf,            ///< not found
        en,            ///< miss (mg)
        mn,            ///< end of a pipeline (mn)
        error,         ///< ERROR: unknown command
        client_error,  ///< CLIENT_ERROR <text>
        server_error,  ///< SERVER_ERROR <text>
    };
    kind k = kind::en;
    std::string data;                                 ///< VA's value
    std::vector<std::pair<char, std::string>> flags;  ///< returned flags, e.g. {'c', "42"}, {'t', "5"}
    std::string text;                                 ///< the error's text (untrusted)

    /// A returned flag's value, or nullopt.
    std::optional<std::string_view> flag(char f) const;
    /// A returned flag as a number (CAS, TTL: -1 = none), or nullopt.
    std::optional<long long> number(char f) const;
};

/// Incremental parser: feed() bytes, then next() until it returns nullopt (more bytes
/// needed). A line that is not a meta reply sets `ec` to error::protocol_error; the
/// stream is then unusable.
class parser {
public:
    void feed(std::string_view bytes) { buf_.append(bytes); }
    std::optional<reply> next(boost::system::error_code& ec);
    /// Bytes held that are not yet a whole reply.
    std::size_t pending() const noexcept { return buf_.size() - pos_; }
    void clear() noexcept
    {
        buf_.clear();
        pos_ = 0;
    }

private:
    std::string buf_;
    std::size_t pos_ = 0;
};

}  // namespace dlock::memcached::proto
