// SPDX-License-Identifier: BSL-1.0
// libFuzzer target for the etcd gateway codecs (src/etcd/codec.cpp, latch_codec.cpp): any reply body must parse
// or fail with an error code, without crashing, leaking or reading out of bounds; base64
// round-trips. The first byte picks the parser, the rest is the body.
#include "etcd/codec.hpp"
#include "etcd/latch_codec.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

namespace codec = dlock::etcd::detail;

// A parser that says no must say why.
void check(bool ok, const codec::reply_error& err)
{
    if (!ok && !err.code)
        __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    codec::reply_error err;
    switch (data[0] % 13) {
    case 0:
    case 1: {
        codec::acquire_reply r;
        check(codec::parse_acquire(body, data[0] % 2 == 0, "/p/n/694d", "tok", 0x694d, r, err), err);
        break;
    }
    case 2: {
        codec::confirm_reply r;
        check(codec::parse_confirm(body, r, err), err);
        break;
    }
    case 3: {
        bool deleted = false, held = false;
        check(codec::parse_release(body, "/p/n/694d", deleted, held, err), err);
        break;
    }
    case 4: {
        bool succeeded = false;
        check(codec::parse_succeeded(body, succeeded, err), err);
        break;
    }
    case 5: {
        codec::predecessor_reply r;
        check(codec::parse_predecessor(body, r, err), err);
        break;
    }
    case 6: {
        codec::range_reply r;
        check(codec::parse_range(body, r, err), err);
        break;
    }
    case 7: {
        codec::lease_reply r;
        check(codec::parse_lease(body, r, err), err);
        break;
    }
    case 8: {
        codec::watch_message m;
        check(codec::parse_watch_message(body, m, err), err);
        break;
    }
    case 9: {
        // Any status with any body is classified as some error; base64 round-trips.
        unsigned status = size > 1 ? 200u + data[1] * 2u : 200u;
        if (!codec::classify(status, body).code)
            __builtin_trap();
        std::string back;
        if (!codec::base64_decode(codec::base64_encode(body), back) || back != body)
            __builtin_trap();
        codec::base64_decode(body, back);
        codec::permits_in(body);
        codec::latch_count_in(body);
        break;
    }
    case 10: {
        codec::latch_read r;
        check(codec::parse_latch_read(body, r, err), err);
        break;
    }
    case 11: {
        codec::latch_count r;
        check(codec::parse_latch_count_down(body, r, err), err);
        break;
    }
    case 12: {
        codec::acquire_reply r;
        std::optional<codec::key_value> writer;
        check(codec::parse_rw_acquire(body, "/p/n/read/694d", "tok", 0x694d, r, writer, err), err);
        break;
    }
    }
    return 0;
}
