// SPDX-License-Identifier: BSL-1.0
#include <dlock/redis/request.hpp>

#include <charconv>
#include <cstring>

namespace dlock::redis {

void request::begin_command(std::size_t nargs)
{
    payload_ += '*';
    payload_ += std::to_string(nargs);
    payload_ += "\r\n";
}

void request::add_arg(std::string_view s)
{
    encode_arg(payload_, s);
}

// "$<length>\r\n<parts...>\r\n", grown once and written in place: every lock operation
// encodes a handful of these.
void request::encode_bulk(std::string& out, std::span<const std::string_view> parts)
{
    std::size_t n = 0;
    for (auto p : parts)
        n += p.size();
    char len[24];
    auto digits = static_cast<std::size_t>(std::to_chars(len, len + sizeof len, n).ptr - len);
    std::size_t at = out.size();
    out.resize(at + 1 + digits + 2 + n + 2);
    char* w = out.data() + at;
    *w++ = '$';
    std::memcpy(w, len, digits);
    w += digits;
    *w++ = '\r';
    *w++ = '\n';
    for (auto p : parts) {
        if (!p.empty())
            std::memcpy(w, p.data(), p.size());
        w += p.size();
    }
    *w++ = '\r';
    *w = '\n';
}

request& request::push_encoded(std::string_view command, std::string_view first, std::size_t nargs,
                               std::string_view encoded_rest)
{
    payload_.reserve(payload_.size() + 40 + command.size() + first.size() + encoded_rest.size());
    begin_command(nargs);
    add_arg(command);
    add_arg(first);
    payload_.append(encoded_rest.data(), encoded_rest.size());
    ++commands_;
    return *this;
}

request& request::push_range(std::string_view command, std::span<const std::string> args)
{
    begin_command(1 + args.size());
    add_arg(command);
    for (const auto& a : args)
        add_arg(std::string_view(a));
    ++commands_;
    return *this;
}

}  // namespace dlock::redis
