// SPDX-License-Identifier: BSL-1.0
// Which of our keys under a name each of its tokens uses: slot 0 is etcd's own
// `<name>/<lease hex>`; a second token of this store on the name at once takes slot 1
// (`<name>/<lease hex>-1`), and so on; a slot is freed once its key is known gone. So a
// name has as many key names of ours as tokens at once: etcd keeps every deleted key name
// in its index until compaction, and each one slows the range reads of the name. A slot
// also keeps its key's create revision once an acquire has read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dlock::etcd::detail {

class key_slots {
public:
    /// `token`'s slot on `name`, if it has one.
    std::optional<std::size_t> find(const std::string& name, const std::string& token) const
    {
        auto s = slots_.find(name);
        if (s == slots_.end())
            return std::nullopt;
        auto it = std::find_if(s->second.begin(), s->second.end(), [&](const slot& e) { return e.token == token; });
        if (it == s->second.end())
            return std::nullopt;
        return static_cast<std::size_t>(it - s->second.begin());
    }
    /// The create revision of `token`'s key on `name`, 0 if not known.
    std::int64_t created(const std::string& name, const std::string& token) const
    {
        auto i = find(name, token);
        return i ? slots_.at(name)[*i].created : 0;
    }
    /// `token`'s key on `name` (it has a slot) was created at `revision`.
    void set_created(const std::string& name, const std::string& token, std::int64_t revision)
    {
        if (auto i = find(name, token))
            slots_.at(name)[*i].created = revision;
    }
    /// The same, giving the token the lowest free slot if it has none.
    std::size_t assign(const std::string& name, const std::string& token)
    {
        auto& v = slots_[name];
        auto it = std::find_if(v.begin(), v.end(), [&](const slot& e) { return e.token == token; });
        if (it == v.end()) {
            it = std::find_if(v.begin(), v.end(), [](const slot& e) { return e.token.empty(); });
            if (it == v.end())
                it = v.insert(v.end(), slot{token, 0});
            else
                *it = slot{token, 0};
        }
        return static_cast<std::size_t>(it - v.begin());
    }
    /// `token` has no key on `name` any more.
    void free(const std::string& name, const std::string& token)
    {
        auto s = slots_.find(name);
        if (s == slots_.end())
            return;
        auto& v = s->second;
        for (auto& e : v)
            if (e.token == token)
                e = slot{};
        while (!v.empty() && v.back().token.empty())
            v.pop_back();
        if (v.empty())
            slots_.erase(s);
    }
    /// Every key went (with the lease).
    void clear() { slots_.clear(); }
    bool empty() const { return slots_.empty(); }

private:
    struct slot {
        std::string token;         // "" = free
        std::int64_t created = 0;  // the key's create revision, 0 if not known
    };
    std::map<std::string, std::vector<slot>> slots_;  // name -> its slots
};

}  // namespace dlock::etcd::detail
