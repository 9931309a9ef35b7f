// SPDX-License-Identifier: BSL-1.0
#include "etcd/latch_codec.hpp"

#include "etcd/json_ops.hpp"

#include <charconv>

namespace dlock::etcd::detail {

namespace {

constexpr std::string_view latch_marker = "dlock-latch/";

json::object count_members(std::string_view range)
{
    return op("request_range", count_range_op(std::string(range) + "member/"));
}

}  // namespace

std::string latch_key(std::string_view range)
{
    return std::string(range) + "latch";
}

std::string member_key(std::string_view range, std::string_view member)
{
    return std::string(range) + "member/" + std::string(member);
}

std::string latch_value(std::uint64_t count)
{
    return std::string(latch_marker) + std::to_string(count);
}

std::optional<std::uint64_t> latch_count_in(std::string_view value)
{
    if (value.substr(0, latch_marker.size()) != latch_marker)
        return std::nullopt;
    auto rest = value.substr(latch_marker.size());
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec != std::errc() || end != rest.data() + rest.size() || rest.empty() || n == 0)
        return std::nullopt;
    return n;
}

std::string latch_read_txn(std::string_view range)
{
    return txn({},
               {op("request_range", range_op(latch_key(range), {}, 0, true)),
                op("request_range", range_op(range, prefix_end(range), 1, true)), count_members(range)},
               {});
}

bool parse_latch_read(std::string_view body, latch_read& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    out = {};
    out.revision = header_revision(*o);
    auto* counted = response_at(*o, 2, "response_range");
    if (!first_kv(response_at(*o, 0, "response_range"), out.latch) ||
        !first_kv(response_at(*o, 1, "response_range"), out.first) || !counted)
        return shape_error(err, "latch read: ranges missing");
    if (!get_int(*counted, "count", out.members))
        return shape_error(err, "latch read: no count");
    return true;
}

std::string latch_count_down_txn(std::string_view range, std::int64_t created, std::uint64_t count,
                                 std::string_view member, std::int64_t lease)
{
    // The latch key is put again by every count-down: a new value the waiters' watch hears, in
    // the same step as the member (a count-down retried after a lost reply wakes them too).
    // A new latch needs the whole range empty: no other kind's key came meanwhile.
    json::array ops{put_op(latch_key(range), latch_value(count), lease), put_op(member_key(range, member), {}, lease),
                    count_members(range)};
    auto cmp =
        created == 0 ? compare_create(range, prefix_end(range), 0) : compare_create(latch_key(range), {}, created);
    return txn({std::move(cmp)}, std::move(ops), {});
}

std::string latch_touch_txn(std::string_view range, std::int64_t created, std::uint64_t count, std::int64_t lease)
{
    return txn({compare_create(latch_key(range), {}, created)}, {put_op(latch_key(range), latch_value(count), lease)},
               {});
}

bool is_latch_key(std::string_view range, std::string_view key)
{
    if (key.substr(0, range.size()) != range)
        return false;
    auto rest = key.substr(range.size());
    return rest == "latch" || rest.substr(0, 7) == "member/";
}

bool parse_latch_count_down(std::string_view body, latch_count& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    out = {};
    out.revision = header_revision(*o);
    out.put = succeeded(*o);
    if (!out.put)
        return true;
    auto* rs = o->if_contains("responses");
    if (!rs || !rs->is_array() || rs->as_array().empty())
        return shape_error(err, "latch count-down: no responses");
    auto* counted = response_at(*o, rs->as_array().size() - 1, "response_range");
    if (!counted || !get_int(*counted, "count", out.members))
        return shape_error(err, "latch count-down: no count");
    return true;
}

}  // namespace dlock::etcd::detail
