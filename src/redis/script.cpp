#include <dlock/redis/request.hpp>
#include <dlock/redis/script.hpp>

#include <openssl/sha.h>

#include <charconv>

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
    encoded_.reserve(reserve);
    add(static_cast<long long>(keys));
    count_ = 0;
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
