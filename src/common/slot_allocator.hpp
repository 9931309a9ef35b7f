// SPDX-License-Identifier: BSL-1.0
// Memory for an operation that is never in flight twice at once (a connection's one read,
// its one write): one block, kept and reused, instead of Asio's per-thread cache, which
// the many other handlers of a lock operation keep evicting (a memalign and a free each).
#pragma once

#include <cstddef>
#include <new>

namespace dlock::detail {

/// The block. Must outlive every allocator made from it and every block it handed out.
class op_slot {
public:
    op_slot() = default;
    op_slot(const op_slot&) = delete;
    op_slot& operator=(const op_slot&) = delete;
    ~op_slot() { ::operator delete(block_); }

    void* allocate(std::size_t bytes)
    {
        if (busy_)  // a second operation at once (not expected): the heap, as without a slot
            return ::operator new(bytes);
        if (bytes > size_) {
            void* grown = ::operator new(bytes);
            ::operator delete(block_);
            block_ = grown;
            size_ = bytes;
        }
        busy_ = true;
        return block_;
    }

    void deallocate(void* p) noexcept
    {
        if (p == block_ && busy_)
            busy_ = false;
        else
            ::operator delete(p);
    }

    bool busy() const noexcept { return busy_; }

private:
    void* block_ = nullptr;
    std::size_t size_ = 0;
    bool busy_ = false;
};

/// A standard allocator over an op_slot, to bind to a handler (asio::bind_allocator).
template <class T>
class slot_allocator {
public:
    using value_type = T;

    explicit slot_allocator(op_slot& s) noexcept : slot_(&s) {}
    template <class U>
    slot_allocator(const slot_allocator<U>& other) noexcept : slot_(other.slot())
    {
    }

    T* allocate(std::size_t n)
    {
        static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "the slot is aligned as operator new");
        return static_cast<T*>(slot_->allocate(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t) noexcept { slot_->deallocate(p); }

    op_slot* slot() const noexcept { return slot_; }
    template <class U>
    bool operator==(const slot_allocator<U>& other) const noexcept
    {
        return slot_ == other.slot();
    }

private:
    op_slot* slot_;
};

}  // namespace dlock::detail
