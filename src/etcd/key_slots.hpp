// SPDX-License-Identifier: BSL-1.0
// Which of our keys under a name each of its tokens uses: slot 0 is etcd's own
// `<name>/<lease hex>`; a second token of this store on the name at once takes slot 1
// (`<name>/<lease hex>-1`), and so on; a slot is freed once its key is known gone. So a
// name has as many key names of ours as tokens at once: etcd keeps every deleted key name
// in its index until compaction, and each one slows the range reads of the name.
#pragma once

#include <algorithm>
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
        auto it = std::find(s->second.begin(), s->second.end(), token);
        if (it == s->second.end())
            return std::nullopt;
        return static_cast<std::size_t>(it - s->second.begin());
    }
    /// The same, giving the token the lowest free slot if it has none.
    std::size_t assign(const std::string& name, const std::string& token)
    {
        auto& v = slots_[name];
        auto it = std::find(v.begin(), v.end(), token);
        if (it == v.end()) {
            it = std::find(v.begin(), v.end(), std::string());
            if (it == v.end())
                it = v.insert(v.end(), token);
            else
                *it = token;
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
        std::replace(v.begin(), v.end(), token, std::string());
        while (!v.empty() && v.back().empty())
            v.pop_back();
        if (v.empty())
            slots_.erase(s);
    }
    /// Every key went (with the lease).
    void clear() { slots_.clear(); }
    bool empty() const { return slots_.empty(); }

private:
    std::map<std::string, std::vector<std::string>> slots_;  // name -> token per slot ("" = free)
};

}  // namespace dlock::etcd::detail
