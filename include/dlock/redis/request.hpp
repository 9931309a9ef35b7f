// A batch of commands, encoded to RESP as they are added so a request is sent as-is.
#pragma once

#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace dlock::redis {

/// One or more commands sent together; the reply to each arrives in the same order.
/// Arguments are binary-safe strings or integers.
class request {
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

    /// Number of commands, hence of replies expected.
    std::size_t size() const noexcept { return commands_; }
    /// No commands yet.
    bool empty() const noexcept { return commands_ == 0; }

    /// The RESP bytes to write.
    const std::string& payload() const noexcept { return payload_; }

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
