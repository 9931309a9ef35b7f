// SPDX-License-Identifier: BSL-1.0
#include "memcached/protocol.hpp"

#include <dlock/error.hpp>

#include <charconv>

namespace dlock::memcached::proto {

namespace {

std::string base64(std::string_view in)
{
    static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
        out += table[v >> 18 & 63];
        out += table[v >> 12 & 63];
        out += table[v >> 6 & 63];
        out += table[v & 63];
    }
    if (i < in.size()) {
        unsigned v = (unsigned char)in[i] << 16 | (i + 1 < in.size() ? (unsigned char)in[i + 1] << 8 : 0u);
        out += table[v >> 18 & 63];
        out += table[v >> 12 & 63];
        out += i + 1 < in.size() ? table[v >> 6 & 63] : '=';
        out += '=';
    }
    return out;
}

std::string command(std::string_view op, const wire_key& key, std::string_view middle, std::string_view flags)
{
    std::string s;
    s.reserve(op.size() + key.text.size() + middle.size() + flags.size() + 8);
    s += op;
    s += ' ';
    s += key.text;
    if (!middle.empty()) {
        s += ' ';
        s += middle;
    }
    if (key.base64)
        s += " b";
    if (!flags.empty()) {
        s += ' ';
        s += flags;
    }
    s += "\r\n";
    return s;
}

bool to_number(std::string_view s, long long& out)
{
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

wire_key encode_key(std::string_view key)
{
    if (key.empty() || key.size() > max_key)
        return {};
    bool plain = true;
    for (unsigned char c : key)
        plain = plain && c > 0x20 && c < 0x7f;
    if (plain)
        return {std::string(key), false};
    return {base64(key), true};
}

std::string mg(const wire_key& key, std::string_view flags)
{
    return command("mg", key, {}, flags);
}
std::string ms(const wire_key& key, std::string_view data, std::string_view flags)
{
    auto s = command("ms", key, std::to_string(data.size()), flags);
    s += data;
    s += "\r\n";
    return s;
}
std::string md(const wire_key& key, std::string_view flags)
{
    return command("md", key, {}, flags);
}
std::string ma(const wire_key& key, std::string_view flags)
{
    return command("ma", key, {}, flags);
}
std::string mn()
{
    return "mn\r\n";
}

std::optional<std::string_view> reply::flag(char f) const
{
    for (const auto& [c, v] : flags)
        if (c == f)
            return std::string_view(v);
    return std::nullopt;
}

std::optional<long long> reply::number(char f) const
{
    auto v = flag(f);
    long long n = 0;
    if (!v || !to_number(*v, n))
        return std::nullopt;
    return n;
}

namespace {

// A meta reply's code and flags (for VA, `size` is its value's length); false if the line is
// not a meta reply.
bool parse_meta(std::string_view word, std::string_view rest, reply& r, long long& size)
{
    static constexpr std::pair<std::string_view, reply::kind> kinds[] = {
        {"VA", reply::kind::va}, {"HD", reply::kind::hd}, {"NS", reply::kind::ns}, {"EX", reply::kind::ex},
        {"NF", reply::kind::nf}, {"EN", reply::kind::en}, {"MN", reply::kind::mn}};
    bool known = false;
    for (auto [w, k] : kinds)
        if (word == w) {
            r.k = k;
            known = true;
        }
    if (!known)
        return false;
    bool first = r.k == reply::kind::va;
    while (!rest.empty()) {
        auto sp = rest.find(' ');
        auto tok = rest.substr(0, sp);
        rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
        if (tok.empty())
            continue;
        if (first) {
            if (!to_number(tok, size) || size < 0 || size > (1 << 20))
                return false;
            first = false;
            continue;
        }
        r.flags.emplace_back(tok[0], std::string(tok.substr(1)));
    }
    return true;
}

// Whether a VA value is whole in the buffer.
enum class value_state {
    ready,
    partial,
    bad
};

// VA's value: `size` bytes and "\r\n" after the line that ends at `eol`.
value_state read_value(const std::string& buf, std::size_t eol, long long size, reply& r, std::size_t& consumed)
{
    if (size < 0)
        return value_state::bad;
    auto need = static_cast<std::size_t>(size) + 2;
    if (buf.size() - (eol + 2) < need)
        return value_state::partial;  // the value is still on its way
    if (buf.compare(eol + 2 + static_cast<std::size_t>(size), 2, "\r\n") != 0)
        return value_state::bad;
    r.data = buf.substr(eol + 2, static_cast<std::size_t>(size));
    consumed += need;
    return value_state::ready;
}

// Past one reply: the buffer is emptied once all of it was read, compacted once far enough in.
void drop_read(std::string& buf, std::size_t& pos, std::size_t consumed)
{
    pos += consumed;
    if (pos == buf.size()) {
        buf.clear();
        pos = 0;
    } else if (pos > 65536) {
        buf.erase(0, pos);
        pos = 0;
    }
}

}  // namespace

std::optional<reply> parser::next(boost::system::error_code& ec)
{
    auto eol = buf_.find("\r\n", pos_);
    if (eol == std::string::npos) {
        // A status line is short; a long run of bytes without one is not memcached.
        if (buf_.size() - pos_ > 8192)
            ec = error::protocol_error;
        return std::nullopt;
    }
    std::string_view line(buf_.data() + pos_, eol - pos_);
    std::size_t consumed = eol + 2 - pos_;
    reply r;
    auto word_end = line.find(' ');
    std::string_view word = line.substr(0, word_end);
    std::string_view rest = word_end == std::string_view::npos ? std::string_view() : line.substr(word_end + 1);
    auto bad = [&]() -> std::optional<reply> {
        ec = error::protocol_error;
        return std::nullopt;
    };
    if (word == "ERROR") {
        r.k = reply::kind::error;
        r.text = std::string(line);
    } else if (word == "CLIENT_ERROR" || word == "SERVER_ERROR") {
        r.k = word == "CLIENT_ERROR" ? reply::kind::client_error : reply::kind::server_error;
        r.text = std::string(line);
    } else {
        long long size = -1;
        if (!parse_meta(word, rest, r, size))
            return bad();
        if (r.k == reply::kind::va) {
            auto state = read_value(buf_, eol, size, r, consumed);
            if (state == value_state::bad)
                return bad();
            if (state == value_state::partial)
                return std::nullopt;
        }
    }
    drop_read(buf_, pos_, consumed);
    return r;
}

}  // namespace dlock::memcached::proto
