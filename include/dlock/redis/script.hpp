// SPDX-License-Identifier: BSL-1.0
/// @file
/// A Lua script sent as EVALSHA, with its SHA1 computed once.
#pragma once

#include <dlock/export.hpp>

#include <boost/container/small_vector.hpp>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace dlock::redis {

/// A Lua script. The connection sends EVALSHA and falls back to EVAL on NOSCRIPT (after a
/// server restart or SCRIPT FLUSH), which also caches the script again.
/// @threadsafety Immutable: copies (sharing one body) may be used from distinct threads at once.
class DLOCK_API script {
public:
    /// Computes the body's SHA1 once; copies share the body.
    explicit script(std::string body);
    /// The Lua source.
    const std::string& body() const noexcept { return *body_; }
    /// Lowercase hex SHA1 of the body, as EVALSHA wants it.
    const std::string& sha1() const noexcept { return sha1_; }
    /// The body, shared: a pending EVAL fallback keeps it without copying it.
    const std::shared_ptr<const std::string>& shared_body() const noexcept { return body_; }

private:
    std::shared_ptr<const std::string> body_;
    std::string sha1_;
};

/// One script call's keys and arguments, RESP-encoded as they are added: a key given in
/// parts ("{tag}ns", ":lock:", name) is joined straight into the encoding, without a string
/// of its own. The keys come first; `keys` says how many of the values are keys. A lock
/// operation's fit in the object itself (no allocation until the command is taken).
/// @threadsafety A value: distinct objects may be used from distinct threads at once.
class DLOCK_API script_args {
public:
    /// `reserve`: bytes to make room for at once (many values: renew_many's).
    explicit script_args(std::size_t keys, std::size_t reserve = 0);
    /// Adds one value (a key while fewer than `keys` were added).
    script_args& add(std::string_view value);
    /// Adds one value made of `parts` joined, without a string of its own.
    script_args& add(std::span<const std::string_view> parts);
    /// Adds one value made of `parts` joined, e.g. `add({tag, ":lock:", name})`.
    script_args& add(std::initializer_list<std::string_view> parts)
    {
        return add(std::span(parts.begin(), parts.size()));
    }
    /// Adds one integer value, in decimal.
    script_args& add(long long value);
    /// Sends a PING just before the call, in the same write. Redis writes first the client it
    /// last queued a reply for, so the call's own reply then goes out after the messages it
    /// publishes: a release wakes the waiter it hands the name to before its caller, who,
    /// woken first, would take the server's CPU before the waiter is woken.
    script_args& ping_first() noexcept
    {
        ping_first_ = true;
        return *this;
    }
    /// Whether ping_first() was asked for.
    bool pings_first() const noexcept { return ping_first_; }
    /// Keys and arguments added so far.
    std::size_t count() const noexcept { return count_; }
    /// How many of the values are keys (as given to the constructor).
    std::size_t keys() const noexcept { return keys_; }
    /// numkeys, then every value, as RESP bulk strings.
    std::string_view encoded() const noexcept { return {buf_.data(), buf_.size()}; }
    /// The whole command: "*<n>", `command` and `first` (EVALSHA and a SHA1), then encoded(),
    /// in one string of the exact size, after the PING of ping_first(). `head` gets where
    /// encoded() starts in it.
    std::string take_command(std::string_view command, std::string_view first, std::size_t& head) &&;

private:
    boost::container::small_vector<char, 232> buf_;
    std::size_t keys_;
    std::size_t count_ = 0;
    bool ping_first_ = false;
};

}  // namespace dlock::redis
