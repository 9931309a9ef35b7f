// SPDX-License-Identifier: BSL-1.0
// A completion handler kept for later (a data member, a struct field, a container element):
// what to store instead of a raw any_completion_handler, whose move assignment crashes.
#pragma once

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associated_executor.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace dlock::detail {

/// `any_completion_handler<Signatures...>` with a move assignment that works. Boost 1.81's
/// `operator=(any_completion_handler&&)` copies from its parameter, an lvalue, so the
/// converting constructor wraps the handler in itself until the stack is gone: every
/// `a = std::move(b)`, std::swap, std::optional assignment and container erase of a raw one
/// crashes. Every handler that outlives a call is kept in one of these; the ctest
/// `stored_handlers` fails when a raw one is stored again (scripts/stored_handlers.sh).
template <class... Signatures>
class stored_handler {
public:
    using handler_type = boost::asio::any_completion_handler<Signatures...>;
    using allocator_type = typename handler_type::allocator_type;
    using cancellation_slot_type = typename handler_type::cancellation_slot_type;

    stored_handler() noexcept = default;
    stored_handler(std::nullptr_t) noexcept {}
    /// Only from an rvalue: an lvalue any_completion_handler would be wrapped, not moved.
    stored_handler(handler_type&& h) noexcept : h_(std::move(h)) {}
    /// Any other handler (a lambda, a bound handler), type-erased.
    template <class H, class = std::enable_if_t<!std::is_lvalue_reference_v<H> &&
                                                !std::is_same_v<std::decay_t<H>, stored_handler> &&
                                                !std::is_same_v<std::decay_t<H>, handler_type> &&
                                                !std::is_same_v<std::decay_t<H>, std::nullptr_t>>>
    explicit stored_handler(H&& h) : h_(handler_type(std::move(h)))
    {
    }

    stored_handler(stored_handler&& other) noexcept : h_(std::move(other.h_)) {}
    stored_handler& operator=(stored_handler&& other) noexcept { return *this = std::move(other.h_); }
    stored_handler& operator=(handler_type&& h) noexcept
    {
        handler_type tmp(std::move(h));  // move-construct, then swap: never Asio's operator=
        h_.swap(tmp);
        return *this;
    }
    stored_handler& operator=(std::nullptr_t) noexcept
    {
        handler_type tmp;
        h_.swap(tmp);
        return *this;
    }
    stored_handler(const stored_handler&) = delete;
    stored_handler& operator=(const stored_handler&) = delete;

    void swap(stored_handler& other) noexcept { h_.swap(other.h_); }
    friend void swap(stored_handler& a, stored_handler& b) noexcept { a.swap(b); }

    explicit operator bool() const noexcept { return static_cast<bool>(h_); }
    bool operator!() const noexcept { return !h_; }

    /// Calls the handler once (it is empty afterwards), as any_completion_handler does.
    template <class... Args>
    auto operator()(Args&&... args) -> decltype(std::declval<handler_type&>()(std::forward<Args>(args)...))
    {
        return h_(std::forward<Args>(args)...);
    }

    /// Moves the handler out (this one becomes empty), to pass it on as a parameter.
    handler_type take() noexcept { return std::move(h_); }
    const handler_type& get() const noexcept { return h_; }

    allocator_type get_allocator() const noexcept { return h_.get_allocator(); }
    cancellation_slot_type get_cancellation_slot() const noexcept { return h_.get_cancellation_slot(); }

private:
    handler_type h_;
};

}  // namespace dlock::detail

namespace boost::asio {

/// The wrapped handler's executor (any_completion_handler has no get_executor() member).
template <class... Signatures, class Candidate>
struct associated_executor<dlock::detail::stored_handler<Signatures...>, Candidate> {
    using type = any_completion_executor;
    static type get(const dlock::detail::stored_handler<Signatures...>& h,
                    const Candidate& candidate = Candidate()) noexcept
    {
        return associated_executor<any_completion_handler<Signatures...>, Candidate>::get(h.get(), candidate);
    }
};

}  // namespace boost::asio
