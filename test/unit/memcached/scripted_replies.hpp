// SPDX-License-Identifier: BSL-1.0
// What the unit tests of memcached's step machines (acquire_steps, owner_steps) script: one
// name's keys and the server's replies, written once for both suites.
#pragma once

#include "memcached/acquire_steps.hpp"
#include "memcached/protocol.hpp"

#include <cstdint>
#include <string>

namespace memcached_script {

using dlock::memcached::proto::reply;

/// The keys of the name "job" in the namespace "ns".
inline dlock::memcached::name_keys keys()
{
    namespace proto = dlock::memcached::proto;
    dlock::memcached::name_keys k;
    k.lock_text = "ns:lock:job";
    k.lock = proto::encode_key("ns:lock:job");
    k.fence = proto::encode_key("ns:fence:job");
    k.contended = proto::encode_key("ns:contended:job");
    return k;
}

inline reply of(reply::kind k, std::string data = {}, std::string text = {})
{
    reply r;
    r.k = k;
    r.data = std::move(data);
    r.text = std::move(text);
    return r;
}

/// The lock item as `mg <lock> v c` returns it.
inline reply item(const std::string& owner, std::uint64_t fence, long long cas = 42)
{
    auto r = of(reply::kind::va, owner + " " + std::to_string(fence));
    r.flags = {{'c', std::to_string(cas)}};
    return r;
}

}  // namespace memcached_script
