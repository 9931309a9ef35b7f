// SPDX-License-Identifier: BSL-1.0
// What every copy of a latch or an election shares, whichever primitive: the registry's
// store (and whether it still lives), the name as given and as the store sees it, and the
// registry's retry spacing.
#pragma once

#include <dlock/registry.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <string_view>

namespace dlock::detail {

struct primitive_core {
    store* st = nullptr;
    std::weak_ptr<void> alive;
    boost::asio::any_io_executor ex;
    std::string name;        // as given
    std::string store_name;  // prefix:name
    std::chrono::milliseconds backoff_min{0}, backoff_max{0};
    std::minstd_rand rng{std::random_device{}()};

    bool store_alive() const noexcept { return !alive.expired(); }

    /// Takes the registry's store, prefix and backoff for `n`.
    void bind(registry& reg, std::string_view n)
    {
        const auto& lc = reg.config();
        st = &reg.get_store();
        alive = lifetime_of(*st);
        ex = st->get_executor();
        name = std::string(n);
        store_name = lc.prefix.empty() ? name : lc.prefix + ":" + name;
        backoff_min = std::max(lc.backoff_min, std::chrono::milliseconds(1));
        backoff_max = std::max(lc.backoff_max, backoff_min);
    }
};

}  // namespace dlock::detail
