#include <dlock/redis/request.hpp>

namespace dlock::redis {

void request::begin_command(std::size_t nargs)
{
    payload_ += '*';
    payload_ += std::to_string(nargs);
    payload_ += "\r\n";
}

void request::add_arg(std::string_view s)
{
    payload_ += '$';
    payload_ += std::to_string(s.size());
    payload_ += "\r\n";
    payload_.append(s.data(), s.size());
    payload_ += "\r\n";
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
