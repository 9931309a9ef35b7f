// SPDX-License-Identifier: BSL-1.0
#include <dlock/redis/store.hpp>

#include <array>
#include <vector>

namespace dlock {
namespace {

// CRC16-CCITT (XMODEM), as Redis Cluster hashes keys: a byte at a time from a table made
// at compile time (every lock operation hashes its name; bit by bit cost ~100 instructions a byte).
constexpr std::array<std::uint16_t, 256> crc16_table = [] {
    std::array<std::uint16_t, 256> t{};
    for (unsigned b = 0; b < 256; ++b) {
        std::uint16_t crc = static_cast<std::uint16_t>(b << 8);
        for (int i = 0; i < 8; ++i)
            crc =
                (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
        t[b] = crc;
    }
    return t;
}();

std::uint16_t crc16(std::string_view s) noexcept
{
    std::uint16_t crc = 0;
    for (unsigned char c : s)
        crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ c) & 0xff]);
    return crc;
}

// Shortest tags first, so keys stay short; built once, in well under a millisecond.
std::vector<std::string> build_tags()
{
    std::vector<std::string> tags(16384);
    std::size_t missing = tags.size();
    static constexpr char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    constexpr std::size_t n = sizeof(alphabet) - 1;
    std::string t;
    for (std::size_t len = 1; missing > 0 && len <= 4; ++len) {
        std::vector<std::size_t> idx(len, 0);
        for (;;) {
            t.assign(len, ' ');
            for (std::size_t i = 0; i < len; ++i)
                t[i] = alphabet[idx[i]];
            auto slot = key_slot(t);
            if (tags[slot].empty()) {
                tags[slot] = t;
                if (--missing == 0)
                    break;
            }
            std::size_t i = 0;
            while (i < len && ++idx[i] == n)
                idx[i++] = 0;
            if (i == len)
                break;
        }
    }
    return tags;
}

}  // namespace

unsigned key_slot(std::string_view key) noexcept
{
    auto open = key.find('{');
    if (open != std::string_view::npos) {
        auto close = key.find('}', open + 1);
        if (close != std::string_view::npos && close != open + 1)
            key = key.substr(open + 1, close - open - 1);
    }
    return crc16(key) & 16383u;
}

const std::string& slot_tag(unsigned slot)
{
    static const std::vector<std::string> tags = build_tags();
    return tags[slot & 16383u];
}

}  // namespace dlock
