#include "resp/decoder.hpp"

#include <dlock/error.hpp>

#include <hiredis/read.h>

#include <memory>
#include <stdexcept>

namespace dlock::resp {
namespace {

using redis::reply;
using redis::reply_type;

// hiredis builds the tree through these callbacks; a nested value lives inside its parent's
// `elements`, pre-sized by createArray, so only the root is heap-allocated by us.
reply* place(const redisReadTask* task)
{
    if (task->parent) {
        auto* parent = static_cast<reply*>(task->parent->obj);
        return &parent->elements[static_cast<std::size_t>(task->idx)];
    }
    return new reply;
}

void* create_string(const redisReadTask* task, char* str, size_t len)
{
    reply* r = place(task);
    switch (task->type) {
    case REDIS_REPLY_ERROR: r->type = reply_type::error; break;
    case REDIS_REPLY_STATUS: r->type = reply_type::status; break;
    default: r->type = reply_type::string; break;
    }
    r->str.assign(str, len);
    return r;
}

void* create_array(const redisReadTask* task, int elements)
{
    reply* r = place(task);
    r->type = reply_type::array;
    r->elements.resize(static_cast<std::size_t>(elements));
    return r;
}

void* create_integer(const redisReadTask* task, long long value)
{
    reply* r = place(task);
    r->type = reply_type::integer;
    r->integer = value;
    return r;
}

void* create_nil(const redisReadTask* task)
{
    reply* r = place(task);
    r->type = reply_type::nil;
    return r;
}

// hiredis frees only the root (on error or if the caller drops it); children belong to it.
void free_object(void* obj) { delete static_cast<reply*>(obj); }

redisReplyObjectFunctions functions = {create_string, create_array, create_integer, create_nil, free_object};

}  // namespace

decoder::decoder() : reader_(redisReaderCreateWithFunctions(&functions))
{
    if (!reader_)
        throw std::bad_alloc();
}

decoder::~decoder() { redisReaderFree(reader_); }

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
    if (redisReaderGetReply(reader_, &obj) != REDIS_OK) {
        ec = error::protocol_error;
        return std::nullopt;
    }
    if (!obj)
        return std::nullopt;
    std::unique_ptr<reply> owned(static_cast<reply*>(obj));
    return std::move(*owned);
}

void decoder::reset()
{
    redisReaderFree(reader_);
    reader_ = redisReaderCreateWithFunctions(&functions);
    if (!reader_)
        throw std::bad_alloc();
}

}  // namespace dlock::resp
