// SPDX-License-Identifier: BSL-1.0
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
    if (reserve > buf_.capacity())
        buf_.reserve(reserve);
    add(static_cast<long long>(keys));
    count_ = 0;
}

namespace {

std::size_t decimal_digits(std::size_t v) noexcept
{
    std::size_t d = 1;
    for (; v >= 10; v /= 10)
        ++d;
    return d;
}

// "<lead><n>\r\n" at `w` ('$' before a bulk string, '*' before a command's arguments);
// returns the end.
char* put_number(char* w, char lead, std::size_t n) noexcept
{
    *w++ = lead;
    w = std::to_chars(w, w + decimal_digits(n), n).ptr;  // the room the caller sized
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

std::size_t bulk_size(std::size_t n) noexcept
{
    return 1 + decimal_digits(n) + 2 + n + 2;
}

// "$<len>\r\n<s>\r\n" at `w`; returns the end.
char* put_bulk(char* w, std::string_view s) noexcept
{
    w = put_number(w, '$', s.size());
    if (!s.empty())
        std::memcpy(w, s.data(), s.size());
    w += s.size();
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

}  // namespace

// Grown without zero-filling (default_init) and written in place: a lock operation encodes
// a dozen of these, and a std::string's resize and appends cost more than the bytes.
script_args& script_args::add(std::span<const std::string_view> parts)
{
    std::size_t n = 0;
    for (auto p : parts)
        n += p.size();
    const std::size_t at = buf_.size();
    buf_.resize(at + bulk_size(n), boost::container::default_init);
    char* w = put_number(buf_.data() + at, '$', n);
    for (auto p : parts) {
        if (!p.empty())
            std::memcpy(w, p.data(), p.size());
        w += p.size();
    }
    *w++ = '\r';
    *w = '\n';
    ++count_;
    return *this;
}

script_args& script_args::add(std::string_view value)
{
    return add(std::span<const std::string_view>(&value, 1));
}

script_args& script_args::add(long long value)
{
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
    return add(std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

std::string script_args::take_command(std::string_view command, std::string_view first, std::size_t& head) &&
{
    // "*<args>\r\n$<len>\r\n<command>\r\n$<len>\r\n<first>\r\n", then the values
    static constexpr std::string_view ping = "*1\r\n$4\r\nPING\r\n";
    const std::size_t before = ping_first_ ? ping.size() : 0;
    const std::size_t nargs = 2 + count_ + 1;  // command, first, numkeys, the values
    head = before + 1 + decimal_digits(nargs) + 2 + bulk_size(command.size()) + bulk_size(first.size());
    std::string out;
    out.resize(head + buf_.size());
    if (before)
        std::memcpy(out.data(), ping.data(), before);
    char* w = put_number(out.data() + before, '*', nargs);
    w = put_bulk(w, command);
    w = put_bulk(w, first);
    if (!buf_.empty())
        std::memcpy(w, buf_.data(), buf_.size());
    buf_.clear();
    return out;
}

}  // namespace dlock::redis
