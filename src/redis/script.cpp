#include <dlock/redis/request.hpp>
#include <dlock/redis/script.hpp>

#include <openssl/sha.h>

#include <charconv>
#include <cstring>

namespace dlock::redis {

script::script(std::string body) : body_(std::make_shared<const std::string>(std::move(body)))
{
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(body_->data()), body_->size(), digest);
    static constexpr char hex[] = "0123456789abcdef";
    sha1_.reserve(2 * SHA_DIGEST_LENGTH);
    for (unsigned char c : digest) {
        sha1_ += hex[c >> 4];
        sha1_ += hex[c & 15];
    }
}

script_args::script_args(std::size_t keys, std::size_t reserve) : keys_(keys)
{
    encoded_.reserve(head_room + reserve);
    encoded_.assign(head_room, '\0');
    add(static_cast<long long>(keys));
    count_ = 0;
}

std::string script_args::take_command(std::string_view command, std::string_view first, std::size_t& head) &&
{
    // "*<args>\r\n$<len>\r\n<command>\r\n$<len>\r\n<first>\r\n"
    const std::size_t nargs = 2 + count_ + 1;  // command, first, numkeys, the values
    const std::string_view parts[] = {command, first};
    char buf[128];
    std::size_t n = 0;
    const bool small = command.size() + first.size() + 3 * 24 <= sizeof buf;
    if (small) {
        auto put_number = [&](char lead, std::size_t v) {
            buf[n++] = lead;
            n = static_cast<std::size_t>(std::to_chars(buf + n, buf + sizeof buf, v).ptr - buf);
            buf[n++] = '\r';
            buf[n++] = '\n';
        };
        put_number('*', nargs);
        for (auto p : parts) {
            put_number('$', p.size());
            std::memcpy(buf + n, p.data(), p.size());
            n += p.size();
            buf[n++] = '\r';
            buf[n++] = '\n';
        }
    }
    if (!small || n > head_room) {  // EVAL with its body: a string of its own
        std::string out;
        out.reserve(command.size() + first.size() + 64 + encoded_.size() - head_room);
        out += '*';
        out += std::to_string(nargs);
        out += "\r\n";
        for (auto p : parts)
            request::encode_arg(out, p);
        head = out.size();
        out.append(encoded_, head_room);
        encoded_.clear();
        return out;
    }
    std::memcpy(encoded_.data() + head_room - n, buf, n);
    encoded_.erase(0, head_room - n);
    head = n;
    return std::move(encoded_);
}

script_args& script_args::add(std::string_view value)
{
    return add(std::span<const std::string_view>(&value, 1));
}

script_args& script_args::add(std::span<const std::string_view> parts)
{
    request::encode_bulk(encoded_, parts);
    ++count_;
    return *this;
}

script_args& script_args::add(long long value)
{
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
    return add(std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

}  // namespace dlock::redis
