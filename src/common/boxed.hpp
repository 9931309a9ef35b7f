// SPDX-License-Identifier: BSL-1.0
// An optional kept on the heap: a state that is rare or short-lived (an attempt in flight,
// a renewal, a grant that came early) costs a pointer while absent, not its whole size in
// every lock at rest (issue 16: memory per held lock).
#pragma once

#include <memory>
#include <optional>
#include <utility>

namespace dlock::detail {

template <class T>
class boxed {
public:
    boxed() noexcept = default;
    boxed(std::nullopt_t) noexcept {}
    boxed(boxed&&) noexcept = default;
    boxed& operator=(boxed&&) noexcept = default;
    boxed(const boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
    boxed& operator=(const boxed& o) { return *this = boxed(o); }
    boxed& operator=(std::nullopt_t) noexcept
    {
        p_.reset();
        return *this;
    }
    boxed& operator=(T v)
    {
        if (p_)
            *p_ = std::move(v);
        else
            p_ = std::make_unique<T>(std::move(v));
        return *this;
    }

    bool has_value() const noexcept { return p_ != nullptr; }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    void reset() noexcept { p_.reset(); }
    T& operator*() noexcept { return *p_; }
    const T& operator*() const noexcept { return *p_; }
    T* operator->() noexcept { return p_.get(); }
    const T* operator->() const noexcept { return p_.get(); }

private:
    std::unique_ptr<T> p_;
};

}  // namespace dlock::detail
