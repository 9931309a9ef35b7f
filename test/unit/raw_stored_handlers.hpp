// SPDX-License-Identifier: BSL-1.0
// Input of the ctest stored_handlers_check (never compiled): scripts/stored_handlers.sh must
// report exactly the lines marked "// stored" (a raw any_completion_handler kept for later).
#pragma once

using done_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

struct examples {
    boost::asio::any_completion_handler<void(boost::system::error_code)> member;  // stored
    asio::any_completion_handler<void(error_code, reply)> h{};  // stored
    any_completion_handler<Signature> handler = nullptr;  // stored
    mutable asio::any_completion_handler<sig> m;  // stored
    done_handler by_alias;  // stored
    std::vector<asio::any_completion_handler<void(error_code)>> waiters;  // stored
    std::optional<done_handler> maybe;  // stored
    std::pair<int, boost::asio::any_completion_handler<sig>> entry;  // stored
    boost::container::small_vector<std::pair<std::uint64_t, done_handler>, 1> releases;  // stored
    std::deque<asio::any_completion_handler<sig>> queue;  // stored

    // Fine: owned through a pointer, parameters, a local moved in at construction.
    std::unique_ptr<done_handler> lost_waiter;
    std::vector<std::shared_ptr<asio::any_completion_handler<sig>>> shared;
    void f(asio::any_completion_handler<sig> h);
    void g(int a,
           asio::any_completion_handler<sig> h);
    void k(done_handler h, bool b);
    void l()
    {
        auto p = std::make_shared<asio::any_completion_handler<sig>>(std::move(h));
        asio::any_completion_handler<sig> then = asio::bind_cancellation_slot(s, std::move(h));
        std::weak_ptr<done_handler> w = p;
        dlock::detail::stored_handler<sig> kept;
    }
};
