// SPDX-License-Identifier: BSL-1.0
// libFuzzer target for memcached's meta reply parser (src/memcached/protocol.cpp): any bytes,
// in any split, must parse to the same replies or to protocol_error, without crashing,
// leaking or reading out of bounds. The first byte picks the split; the rest is the stream.
#include "memcached/protocol.hpp"

#include <dlock/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace {

namespace proto = dlock::memcached::proto;

struct outcome {
    std::vector<proto::reply> replies;
    bool failed = false;
};

// Feeds `input` in pieces of `chunk` bytes, draining after each piece, up to the first error.
outcome parse(std::string_view input, std::size_t chunk)
{
    proto::parser p;
    outcome out;
    boost::system::error_code ec;
    for (std::size_t off = 0; off < input.size() && !out.failed; off += chunk) {
        p.feed(input.substr(off, chunk));
        while (auto r = p.next(ec))
            out.replies.push_back(std::move(*r));
        if (ec) {
            if (ec != dlock::error::protocol_error)
                __builtin_trap();
            out.failed = true;
        }
    }
    return out;
}

bool same(const proto::reply& a, const proto::reply& b)
{
    return a.k == b.k && a.data == b.data && a.flags == b.flags && a.text == b.text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    std::size_t chunk = data[0] % 17 + 1;
    std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

    outcome whole = parse(input, input.size() + 1);
    outcome split = parse(input, chunk);
    if (whole.failed != split.failed || whole.replies.size() != split.replies.size())
        __builtin_trap();
    for (std::size_t i = 0; i < whole.replies.size(); ++i) {
        if (!same(whole.replies[i], split.replies[i]))
            __builtin_trap();
        // Returned flags read back as numbers or not, never crash.
        for (auto& [f, v] : whole.replies[i].flags)
            (void)whole.replies[i].number(f);
    }
    return 0;
}
