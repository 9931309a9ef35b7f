// SPDX-License-Identifier: BSL-1.0
#include "etcd/json_ops.hpp"

#include <dlock/error.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>

namespace dlock::etcd::detail {

// The gateway writes int64 as JSON strings (proto3 JSON); accept numbers too.
bool get_int(const json::object& o, std::string_view field, std::int64_t& out)
{
    out = 0;
    auto* v = o.if_contains(field);
    if (!v)
        return true;  // proto3 JSON omits zero values
    if (v->is_int64()) {
        out = v->as_int64();
        return true;
    }
    if (v->is_uint64()) {
        out = static_cast<std::int64_t>(v->as_uint64());
        return true;
    }
    if (!v->is_string())
        return false;
    auto s = v->as_string();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

bool get_bytes(const json::object& o, std::string_view field, std::string& out)
{
    out.clear();
    auto* v = o.if_contains(field);
    if (!v)
        return true;
    return v->is_string() && base64_decode(v->as_string(), out);
}

bool get_kv(const json::value& v, key_value& out)
{
    auto* o = v.if_object();
    return o && get_bytes(*o, "key", out.key) && get_bytes(*o, "value", out.value) &&
           get_int(*o, "create_revision", out.create_revision) && get_int(*o, "mod_revision", out.mod_revision) &&
           get_int(*o, "lease", out.lease);
}

bool shape_error(reply_error& err, std::string what)
{
    err.code = error::protocol_error;
    err.text = "etcd: unexpected reply: " + what;
    return false;
}

// Parses a 200 reply into an object, or classifies an error body.
const json::object* parse_object(std::string_view body, json::value& storage, reply_error& err)
{
    boost::system::error_code ec;
    storage = json::parse(body, ec);
    if (ec || !storage.is_object()) {
        shape_error(err, "not a JSON object");
        return nullptr;
    }
    auto& o = storage.as_object();
    if (o.contains("error") || (o.contains("code") && o.contains("message"))) {
        err = classify(500, body);
        return nullptr;
    }
    return &o;
}

// A Txn's compare held: "succeeded" (omitted when false).
bool succeeded(const json::object& o)
{
    auto* s = o.if_contains("succeeded");
    return s && s->is_bool() && s->as_bool();
}

std::int64_t header_revision(const json::object& o)
{
    std::int64_t rev = 0;
    if (auto* h = o.if_contains("header"); h && h->is_object())
        get_int(h->as_object(), "revision", rev);
    return rev;
}

// responses[i].<field> as an object (absent: nullptr).
const json::object* response_at(const json::object& o, std::size_t i, std::string_view field)
{
    auto* rs = o.if_contains("responses");
    if (!rs || !rs->is_array() || rs->as_array().size() <= i || !rs->as_array()[i].is_object())
        return nullptr;
    auto* r = rs->as_array()[i].as_object().if_contains(field);
    return r && r->is_object() ? &r->as_object() : nullptr;
}

// Every key-value of a range reply, in its order.
bool all_kvs(const json::object* range, std::vector<key_value>& out)
{
    out.clear();
    if (!range)
        return false;
    auto* kvs = range->if_contains("kvs");
    if (!kvs)
        return true;
    if (!kvs->is_array())
        return false;
    for (auto& e : kvs->as_array()) {
        key_value kv;
        if (!get_kv(e, kv))
            return false;
        out.push_back(std::move(kv));
    }
    return true;
}

bool first_kv(const json::object* range, std::optional<key_value>& out)
{
    out.reset();
    std::vector<key_value> kvs;
    if (!all_kvs(range, kvs))
        return false;
    if (!kvs.empty())
        out = std::move(kvs.front());
    return true;
}

json::object count_range_op(std::string_view prefix)
{
    auto r = range_op(prefix, prefix_end(prefix), 0, true);
    r["count_only"] = true;
    r.erase("sort_target");
    r.erase("sort_order");
    return r;
}

json::object range_op(std::string_view key, std::string_view end, std::int64_t limit, bool ascend,
                      std::int64_t max_create)
{
    json::object r{{"key", base64_encode(key)}};
    if (!end.empty())
        r["range_end"] = base64_encode(end);
    if (limit > 0)
        r["limit"] = std::to_string(limit);
    if (!end.empty()) {
        r["sort_target"] = "CREATE";
        r["sort_order"] = ascend ? "ASCEND" : "DESCEND";
    }
    if (max_create > 0)
        r["max_create_revision"] = std::to_string(max_create);
    return r;
}

json::object op(std::string_view kind, json::object body)
{
    return json::object{{kind, std::move(body)}};
}

json::object compare_create(std::string_view key, std::string_view end, std::int64_t rev)
{
    json::object c{{"result", "EQUAL"},
                   {"target", "CREATE"},
                   {"key", base64_encode(key)},
                   {"create_revision", std::to_string(rev)}};
    if (!end.empty())
        c["range_end"] = base64_encode(end);
    return c;
}

json::object compare_value(std::string_view key, std::string_view value)
{
    return {{"result", "EQUAL"}, {"target", "VALUE"}, {"key", base64_encode(key)}, {"value", base64_encode(value)}};
}

json::object put_op(std::string_view key, std::string_view value, std::int64_t lease)
{
    return op("request_put",
              {{"key", base64_encode(key)}, {"value", base64_encode(value)}, {"lease", std::to_string(lease)}});
}

std::string txn(json::array compare, json::array success, json::array failure)
{
    json::object t{{"compare", std::move(compare)}};
    if (!success.empty())
        t["success"] = std::move(success);
    if (!failure.empty())
        t["failure"] = std::move(failure);
    return json::serialize(t);
}

}  // namespace dlock::etcd::detail
