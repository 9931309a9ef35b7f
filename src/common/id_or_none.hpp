// SPDX-License-Identifier: BSL-1.0
// An optional id in the id's own 8 bytes: `none` (the maximum, which no counter reaches)
// stands for no value. std::optional would take 16 in state every lock carries.
#pragma once

#include <cstdint>
#include <optional>

namespace dlock::detail {

template <class Id = std::uint64_t, Id None = ~Id(0)>
class id_or_none {
public:
    id_or_none() noexcept = default;
    id_or_none(std::nullopt_t) noexcept {}
    id_or_none(Id v) noexcept : v_(v) {}
    id_or_none& operator=(std::nullopt_t) noexcept
    {
        v_ = None;
        return *this;
    }
    explicit operator bool() const noexcept { return v_ != None; }
    Id operator*() const noexcept { return v_; }

private:
    Id v_ = None;
};

}  // namespace dlock::detail
