// SPDX-License-Identifier: BSL-1.0
#include "redis/resp/decoder.hpp"

#include <dlock/error.hpp>

#include <hiredis/read.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace dlock::resp {
namespace {

using redis::reply;
using redis::reply_type;

// The spare root of the decoder whose next() runs on this thread (hiredis calls back inside
// it): a reply's root object is reused from one reply to the next instead of allocated.
thread_local std::unique_ptr<reply>* spare_root = nullptr;

// hiredis builds the tree through these callbacks, children in order; a nested value lives
// inside its parent's `elements`, so only the root is heap-allocated by us (or the spare
// reused). Children are appended rather than pre-sized from the count, which the server
// chose: "*2000000000\r\n" alone would otherwise allocate hundreds of GiB (hiredis accepts
// counts up to INT_MAX).
template <class Fill>
void* place(const redisReadTask* task, Fill fill) noexcept
{
    // No exception may unwind through hiredis's C frames: a null result makes it stop with an
    // out-of-memory error, which next() reports as protocol_error.
    try {
        if (task->parent) {
            auto* parent = static_cast<reply*>(task->parent->obj);
            reply& r = parent->elements.emplace_back();
            fill(r);
            return &r;
        }
        auto r = spare_root && *spare_root ? std::move(*spare_root) : std::make_unique<reply>();
        fill(*r);
        return r.release();
    } catch (...) {
        return nullptr;
    }
}

void* create_string(const redisReadTask* task, char* str, size_t len)
{
    return place(task, [&](reply& r) {
        switch (task->type) {
        case REDIS_REPLY_ERROR: r.type = reply_type::error; break;
        case REDIS_REPLY_STATUS: r.type = reply_type::status; break;
        default: r.type = reply_type::string; break;
        }
        r.str.assign(str, len);
    });
}

void* create_array(const redisReadTask* task, int elements)
{
    if (elements < 0)  // hiredis sends -1 to createNil and rejects other negatives; be sure
        return nullptr;
    return place(task, [&](reply& r) {
        r.type = reply_type::array;
        r.elements.reserve(std::min(static_cast<std::size_t>(elements), std::size_t{1024}));
    });
}

void* create_integer(const redisReadTask* task, long long value)
{
    return place(task, [&](reply& r) {
        r.type = reply_type::integer;
        r.integer = value;
    });
}

void* create_nil(const redisReadTask* task)
{
    return place(task, [](reply& r) { r.type = reply_type::nil; });
}

// hiredis frees only the root (on error or if the caller drops it); children belong to it.
void free_object(void* obj)
{
    delete static_cast<reply*>(obj);
}

redisReplyObjectFunctions functions = {create_string, create_array, create_integer, create_nil, free_object};

}  // namespace

decoder::decoder() : reader_(redisReaderCreateWithFunctions(&functions))
{
    if (!reader_)
        throw std::bad_alloc();
}

decoder::~decoder()
{
    redisReaderFree(reader_);
}

void decoder::feed(std::string_view bytes)
{
    if (!bytes.empty())
        redisReaderFeed(reader_, bytes.data(), bytes.size());
}

std::optional<redis::reply> decoder::next(boost::system::error_code& ec)
{
    ec = {};
    if (reader_->err) {
        ec = error::protocol_error;
        return std::nullopt;
    }
    void* obj = nullptr;
    spare_root = &spare_;
    int rc = redisReaderGetReply(reader_, &obj);
    spare_root = nullptr;
    if (rc != REDIS_OK) {
        ec = error::protocol_error;
        return std::nullopt;
    }
    if (!obj)
        return std::nullopt;
    std::unique_ptr<reply> owned(static_cast<reply*>(obj));
    std::optional<reply> out(std::move(*owned));
    // Emptied, the root is the next reply's (a moved-from string or vector may keep bytes).
    owned->type = reply_type::nil;
    owned->str.clear();
    owned->integer = 0;
    owned->elements.clear();
    spare_ = std::move(owned);
    return out;
}

void decoder::reset()
{
    redisReaderFree(reader_);
    reader_ = redisReaderCreateWithFunctions(&functions);
    if (!reader_)
        throw std::bad_alloc();
}

}  // namespace dlock::resp
