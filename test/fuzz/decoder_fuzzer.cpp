// SPDX-License-Identifier: BSL-1.0
// libFuzzer target for the RESP decoder: any bytes, in any split, must decode to the same
// replies or to protocol_error, without crashing, leaking or reading out of bounds.
//
// ctest runs it a few seconds (fuzz_decoder, after fuzz_build: test/fuzz/run_fuzzers.cmake). By hand:
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DDLOCK_BUILD_FUZZERS=ON \
//         -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_BENCH=OFF
//   cmake --build build-fuzz --target dlock_fuzzers
//   ./build-fuzz/test/fuzz/dlock_decoder_fuzzer -dict=test/fuzz/resp.dict -max_len=4096 test/fuzz/corpus/decoder
#include <dlock/error.hpp>

#include "redis/resp/decoder.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace {

struct outcome {
    std::vector<dlock::redis::reply> replies;
    bool failed = false;
};

// Feeds `input` in pieces of `chunk` bytes, draining after each piece.
outcome decode(std::string_view input, std::size_t chunk)
{
    dlock::resp::decoder d;
    outcome out;
    boost::system::error_code ec;
    for (std::size_t off = 0; off < input.size() && !out.failed; off += chunk) {
        d.feed(input.substr(off, chunk));
        while (auto r = d.next(ec))
            out.replies.push_back(std::move(*r));
        if (ec) {
            if (ec != dlock::error::protocol_error)
                __builtin_trap();
            out.failed = true;
            // The error sticks until reset().
            if (d.next(ec) || ec != dlock::error::protocol_error)
                __builtin_trap();
        }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    // The first byte picks the split; the rest is the stream.
    std::size_t chunk = data[0] % 17 + 1;
    std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

    outcome whole = decode(input, input.size() + 1);
    outcome split = decode(input, chunk);
    // Splitting never changes what comes out, errors included.
    std::size_t common = std::min(whole.replies.size(), split.replies.size());
    for (std::size_t i = 0; i < common; ++i)
        if (!(whole.replies[i] == split.replies[i]))
            __builtin_trap();
    if (whole.failed != split.failed || whole.replies.size() != split.replies.size())
        __builtin_trap();
    return 0;
}
