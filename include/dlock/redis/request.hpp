// SPDX-License-Identifier: BSL-1.0
/// @file
/// A batch of commands, encoded to RESP as they are added so a request is sent as-is.
#pragma once

#include <dlock/export.hpp>

#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace dlock::redis {

/// One or more commands sent together; the reply to each arrives in the same order.
/// Arguments are binary-safe strings or integers.
/// @threadsafety A value: distinct objects may be used from distinct threads at once.
class DLOCK_API request {
public:
    /// Appends one command, e.g. `push("SET", key, value, "PX", 30000)`.
    template <class... Args>
    request& push(std::string_view command, const Args&... args)
    {
        begin_command(1 + sizeof...(Args));
        add_arg(command);
        (add_arg(args), ...);
        ++commands_;
        return *this;
    }

    /// Appends one command whose arguments are given as a range of strings.
    request& push_range(std::string_view command, std::span<const std::string> args);
    /// Appends one command of `nargs` arguments (the command counted) whose first two are
    /// `command` and `first` and whose others are already RESP-encoded in `encoded_rest`
    /// (see encode_arg): a script call encodes its keys and arguments once for both forms.
    request& push_encoded(std::string_view command, std::string_view first, std::size_t nargs,
                          std::string_view encoded_rest);
    /// Appends `s` to `out` as one RESP bulk string.
    static void encode_arg(std::string& out, std::string_view s) { encode_bulk(out, std::span(&s, 1)); }
    /// Appends the concatenation of `parts` to `out` as one RESP bulk string, grown once.
    static void encode_bulk(std::string& out, std::span<const std::string_view> parts);
    /// Reserves room for `n` more bytes.
    void reserve(std::size_t n) { payload_.reserve(payload_.size() + n); }

    /// Number of commands, hence of replies expected.
    std::size_t size() const noexcept { return commands_; }
    /// No commands yet.
    bool empty() const noexcept { return commands_ == 0; }

    /// The RESP bytes to write.
    const std::string& payload() const noexcept { return payload_; }

    /// Moves the RESP bytes out (the request is empty afterwards).
    std::string take_payload() noexcept
    {
        commands_ = 0;
        return std::move(payload_);
    }
    /// Removes every command, keeping the buffer's capacity.
    void clear() noexcept
    {
        payload_.clear();
        commands_ = 0;
    }

private:
    void begin_command(std::size_t nargs);
    void add_arg(std::string_view s);
    void add_arg(const std::string& s) { add_arg(std::string_view(s)); }
    void add_arg(const char* s) { add_arg(std::string_view(s)); }
    template <std::integral T>
    void add_arg(T v)
    {
        add_arg(std::string_view(std::to_string(v)));
    }

    std::string payload_;
    std::size_t commands_ = 0;
};

}  // namespace dlock::redis
