#include <dlock/redis/request.hpp>

#include <charconv>

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

void request::encode_arg(std::string& out, std::string_view s)
{
    char len[24];
    auto [end, ec] = std::to_chars(len, len + sizeof len, s.size());
    (void)ec;
    out += '$';
    out.append(len, end);
    out += "\r\n";
    out.append(s.data(), s.size());
    out += "\r\n";
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
