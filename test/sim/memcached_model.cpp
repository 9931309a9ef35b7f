// SPDX-License-Identifier: BSL-1.0
#include "memcached_model.hpp"

#include <charconv>

namespace dlock::sim {

using memcached::proto::reply;
using kind = reply::kind;

namespace {

std::vector<std::string> split(std::string_view line)
{
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < line.size()) {
        auto j = line.find(' ', i);
        if (j == std::string_view::npos)
            j = line.size();
        if (j > i)
            out.emplace_back(line.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

// The value of flag `f` ("T5" -> "5"), if given.
std::optional<std::string> flag(const std::vector<std::string>& flags, char f)
{
    for (const auto& x : flags)
        if (!x.empty() && x[0] == f)
            return x.substr(1);
    return std::nullopt;
}

bool has(const std::vector<std::string>& flags, char f)
{
    return flag(flags, f).has_value();
}

long long number(const std::string& s)
{
    long long v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
}

reply simple(kind k)
{
    reply r;
    r.k = k;
    return r;
}

}  // namespace

std::int64_t memcached_model::seconds(real_time now) const
{
    return std::chrono::duration_cast<std::chrono::seconds>(now + phase_).count() + 1;
}

std::int64_t memcached_model::expiry(const std::vector<std::string>& flags, char f, real_time now) const
{
    auto t = flag(flags, f);
    if (!t || number(*t) == 0)
        return 0;
    return seconds(now) + number(*t);
}

memcached_model::item* memcached_model::find(const std::string& key, real_time now)
{
    auto it = items_.find(key);
    if (it == items_.end())
        return nullptr;
    if (!live(it->second, now)) {
        items_.erase(it);
        return nullptr;
    }
    return &it->second;
}

std::vector<reply> memcached_model::execute(std::string_view bytes, real_time now)
{
    std::vector<reply> out;
    while (!bytes.empty()) {
        auto eol = bytes.find("\r\n");
        if (eol == std::string_view::npos)
            break;
        auto words = split(bytes.substr(0, eol));
        bytes.remove_prefix(eol + 2);
        std::string_view data;
        if (!words.empty() && words[0] == "ms" && words.size() >= 3) {
            auto n = static_cast<std::size_t>(number(words[2]));
            data = bytes.substr(0, n);
            bytes.remove_prefix(std::min(bytes.size(), n + 2));
        }
        out.push_back(run(words, data, now));
    }
    return out;
}

reply memcached_model::run(const std::vector<std::string>& words, std::string_view data, real_time now)
{
    if (words.size() < 2)
        return simple(kind::error);
    const auto& cmd = words[0];
    const auto& key = words[1];
    std::vector<std::string> flags(words.begin() + (cmd == "ms" ? 3 : 2), words.end());
    if (cmd == "mg")
        return get(key, flags, now);
    if (cmd == "ms")
        return set(key, data, flags, now);
    if (cmd == "md")
        return del(key, flags, now);
    if (cmd == "ma")
        return arith(key, flags, now);
    return simple(kind::error);
}

reply memcached_model::get(const std::string& key, const std::vector<std::string>& flags, real_time now)
{
    auto* it = find(key, now);
    if (!it)
        return simple(kind::en);
    reply r = simple(has(flags, 'v') ? kind::va : kind::hd);
    if (has(flags, 'v'))
        r.data = it->value;
    for (const auto& f : flags) {
        if (f == "c")
            r.flags.emplace_back('c', std::to_string(it->cas));
        if (f == "t")
            r.flags.emplace_back('t', std::to_string(it->exptime == 0 ? -1 : it->exptime - seconds(now)));
    }
    return r;
}

reply memcached_model::set(const std::string& key, std::string_view data, const std::vector<std::string>& flags,
                           real_time now)
{
    auto* it = find(key, now);
    auto mode = flag(flags, 'M').value_or("S");
    if (mode == "E" && it)
        return simple(kind::ns);  // add: the key exists
    if (auto c = flag(flags, 'C')) {
        if (!it)
            return simple(kind::nf);
        if (it->cas != static_cast<std::uint64_t>(number(*c)))
            return simple(kind::ex);
    }
    items_[key] = item{std::string(data), ++cas_, expiry(flags, 'T', now)};
    reply r = simple(kind::hd);
    if (has(flags, 'c'))
        r.flags.emplace_back('c', std::to_string(cas_));
    return r;
}

reply memcached_model::del(const std::string& key, const std::vector<std::string>& flags, real_time now)
{
    auto* it = find(key, now);
    if (!it)
        return simple(kind::nf);
    if (auto c = flag(flags, 'C'); c && it->cas != static_cast<std::uint64_t>(number(*c)))
        return simple(kind::ex);
    items_.erase(key);
    return simple(kind::hd);
}

reply memcached_model::arith(const std::string& key, const std::vector<std::string>& flags, real_time now)
{
    auto* it = find(key, now);
    if (!it) {
        if (!has(flags, 'N'))
            return simple(kind::nf);
        auto initial = flag(flags, 'J').value_or("0");
        items_[key] = item{initial, ++cas_, expiry(flags, 'N', now)};
        it = &items_[key];
    } else {
        auto delta = static_cast<std::uint64_t>(number(flag(flags, 'D').value_or("1")));
        it->value = std::to_string(static_cast<std::uint64_t>(number(it->value)) + delta);
        it->cas = ++cas_;
    }
    reply r = simple(has(flags, 'v') ? kind::va : kind::hd);
    if (has(flags, 'v'))
        r.data = it->value;
    return r;
}

std::vector<std::string> memcached_model::keys(real_time now) const
{
    std::vector<std::string> out;
    for (const auto& [k, it] : items_)
        if (live(it, now))
            out.push_back(k);
    return out;
}

std::optional<std::string> memcached_model::value(const std::string& key, real_time now) const
{
    auto it = items_.find(key);
    if (it == items_.end() || !live(it->second, now))
        return std::nullopt;
    return it->second.value;
}

}  // namespace dlock::sim
