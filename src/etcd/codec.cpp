// SPDX-License-Identifier: BSL-1.0
#include "etcd/codec.hpp"

#include <dlock/error.hpp>

#include "etcd/json_ops.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace dlock::etcd::detail {

namespace {

constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

}  // namespace

std::string base64_encode(std::string_view in)
{
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        unsigned n = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                     static_cast<unsigned char>(in[i + 2]);
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        out += alphabet[(n >> 6) & 63];
        out += alphabet[n & 63];
    }
    if (i + 1 == in.size()) {
        unsigned n = static_cast<unsigned char>(in[i]) << 16;
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        out += "==";
    } else if (i + 2 == in.size()) {
        unsigned n = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        out += alphabet[(n >> 6) & 63];
        out += '=';
    }
    return out;
}

bool base64_decode(std::string_view in, std::string& out)
{
    out.clear();
    if (in.size() % 4 != 0)
        return false;
    out.reserve(in.size() / 4 * 3);
    for (std::size_t i = 0; i < in.size(); i += 4) {
        int a = sextet(in[i]), b = sextet(in[i + 1]);
        bool last = i + 4 == in.size();
        int c = last && in[i + 2] == '=' ? -2 : sextet(in[i + 2]);
        int d = last && in[i + 3] == '=' ? -2 : sextet(in[i + 3]);
        if (a < 0 || b < 0 || c == -1 || d == -1 || (c == -2 && d != -2))
            return false;
        unsigned n = (a << 18) | (b << 12) | ((c < 0 ? 0 : c) << 6) | (d < 0 ? 0 : d);
        out += static_cast<char>((n >> 16) & 255);
        if (c >= 0)
            out += static_cast<char>((n >> 8) & 255);
        if (d >= 0)
            out += static_cast<char>(n & 255);
    }
    return true;
}

std::string prefix_end(std::string_view prefix)
{
    std::string end(prefix);
    while (!end.empty()) {
        if (static_cast<unsigned char>(end.back()) < 0xff) {
            end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');  // every key ("\0" means "to the end" in etcd)
}

std::string lock_key(std::string_view name_prefix, std::int64_t lease)
{
    char hex[17];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(lease));
    std::string k(name_prefix);
    k += hex;
    return k;
}

reply_error classify(unsigned http_status, std::string_view body)
{
    reply_error e;
    boost::system::error_code jec;
    auto v = json::parse(body, jec);
    std::int64_t code = -1;
    if (!jec && v.is_object()) {
        auto& o = v.as_object();
        get_int(o, "code", code);
        for (auto f : {"message", "error"})
            if (auto* m = o.if_contains(f); m && m->is_string() && e.text.empty())
                e.text = std::string(m->as_string());
    }
    if (code < 0) {
        // Not a gateway error body: something else answers on this port.
        e.code = error::protocol_error;
        e.text = "etcd: HTTP " + std::to_string(http_status) +
                 " with no etcd error body (is this an etcd gateway?): " + std::string(body.substr(0, 200));
        return e;
    }
    if (e.text.empty())
        e.text = "etcd: gRPC code " + std::to_string(code);
    // A request over the server's size limits: the same request can never pass, so it is
    // no busy server to wait for (issue 29: a 1 MiB name was retried until its bound).
    bool too_large =
        e.text.find("larger than max") != std::string::npos || e.text.find("request is too large") != std::string::npos;
    if (too_large && (code == 3 || code == 8)) {
        e.code = error::invalid_request;
        e.text += " (the request is larger than the server takes, set by its --max-request-bytes: a lock name "
                  "this long cannot be used here)";
        return e;
    }
    switch (code) {
    case 4:   // DEADLINE_EXCEEDED
    case 8:   // RESOURCE_EXHAUSTED: too many requests
    case 10:  // ABORTED
    case 14:  // UNAVAILABLE: no leader, leader changed, request timed out
        e.code = error::server_busy;
        break;
    case 5:  // NOT_FOUND: "requested lease not found"
        e.code = e.text.find("lease") != std::string::npos ? error::session_lost : error::server_error;
        break;
    case 7: e.code = error::permission_denied; break;
    case 16: e.code = error::auth_failed; break;
    case 3:  // INVALID_ARGUMENT
    case 11: e.code = error::invalid_request; break;
    default: e.code = error::server_error; break;
    }
    return e;
}

std::string queued_acquire_txn(std::string_view key, std::string_view prefix, std::string_view value,
                               std::int64_t lease, std::int64_t firsts)
{
    auto end = prefix_end(prefix);
    auto owner = op("request_range", range_op(prefix, end, firsts, true));
    return txn({compare_create(key, {}, 0)}, {put_op(key, value, lease), owner},
               {op("request_range", range_op(key, {}, 0, true)), owner});
}

std::string try_acquire_txn(std::string_view key, std::string_view prefix, std::string_view value, std::int64_t lease)
{
    auto end = prefix_end(prefix);
    return txn({compare_create(prefix, end, 0)}, {put_op(key, value, lease)},
               {op("request_range", range_op(key, {}, 0, true)), op("request_range", range_op(prefix, end, 1, true))});
}

bool parse_acquire(std::string_view body, bool queued, std::string_view key, std::string_view value, std::int64_t lease,
                   acquire_reply& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    out = {};
    out.revision = header_revision(*o);
    out.put = succeeded(*o);
    if (out.put) {
        out.mine = key_value{std::string(key), std::string(value), out.revision, out.revision, lease};
        if (!queued) {
            out.owner = out.mine;  // the range was empty
            return true;
        }
        if (!all_kvs(response_at(*o, 1, "response_range"), out.firsts))
            return shape_error(err, "acquire: no owner range");
    } else if (!first_kv(response_at(*o, 0, "response_range"), out.mine) ||
               !all_kvs(response_at(*o, 1, "response_range"), out.firsts)) {
        return shape_error(err, "acquire: ranges missing");
    }
    if (!out.firsts.empty())
        out.owner = out.firsts.front();
    return true;
}

namespace {

json::object compare_ours(our_key mine)
{
    return mine.created > 0 ? compare_create(mine.key, {}, mine.created) : compare_value(mine.key, mine.value);
}

}  // namespace

std::string confirm_txn(our_key mine, std::string_view prefix)
{
    return txn({compare_ours(mine)}, {op("request_range", count_range_op(prefix))}, {});
}

bool parse_confirm(std::string_view body, confirm_reply& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    out = {};
    out.owned = succeeded(*o);
    if (out.owned) {
        auto* r = response_at(*o, 0, "response_range");
        if (!r || !get_int(*r, "count", out.count))
            return shape_error(err, "confirm: no count");
    }
    return true;
}

std::string release_txn(our_key mine, std::string_view prefix, std::int64_t firsts)
{
    return txn({compare_ours(mine)},
               {op("request_range", range_op(prefix, prefix_end(prefix), firsts, true)),
                op("request_delete_range", {{"key", base64_encode(mine.key)}})},
               {});
}

bool parse_release(std::string_view body, std::string_view key, bool& deleted, bool& held, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    deleted = succeeded(*o);
    held = false;
    if (!deleted)
        return true;
    std::vector<key_value> firsts;
    if (!all_kvs(response_at(*o, 0, "response_range"), firsts))
        return shape_error(err, "release: no range");
    held = std::any_of(firsts.begin(), firsts.end(), [&](const key_value& kv) { return kv.key == key; });
    return true;
}

std::string side_prefix(std::string_view range, bool write)
{
    return std::string(range) + (write ? "write/" : "read/");
}

bool is_rw_key(std::string_view range, std::string_view key)
{
    if (key.substr(0, range.size()) != range)
        return false;
    auto rest = key.substr(range.size());
    return rest.substr(0, 5) == "read/" || rest.substr(0, 6) == "write/";
}

std::string rw_acquire_txn(std::string_view key, std::string_view range, std::string_view value, std::int64_t lease)
{
    auto writers = side_prefix(range, true);
    auto first = op("request_range", range_op(range, prefix_end(range), 1, true));
    auto writer = op("request_range", range_op(writers, prefix_end(writers), 1, true));
    return txn({compare_create(key, {}, 0)}, {put_op(key, value, lease), first, writer},
               {op("request_range", range_op(key, {}, 0, true)), first, writer});
}

bool parse_rw_acquire(std::string_view body, std::string_view key, std::string_view value, std::int64_t lease,
                      acquire_reply& out, std::optional<key_value>& first_writer, reply_error& err)
{
    if (!parse_acquire(body, true, key, value, lease, out, err))
        return false;
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o || !first_kv(response_at(*o, 2, "response_range"), first_writer))
        return shape_error(err, "read-write acquire: no writers' range");
    return true;
}

namespace {

constexpr std::string_view permit_marker = "dlock-semaphore/";

}  // namespace

std::string permit_value(std::string_view token, unsigned permits)
{
    return std::string(permit_marker) + std::to_string(permits) + "/" + std::string(token);
}

std::optional<unsigned> permits_in(std::string_view value)
{
    if (value.substr(0, permit_marker.size()) != permit_marker)
        return std::nullopt;
    auto rest = value.substr(permit_marker.size());
    unsigned n = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '/' || n == 0)
        return std::nullopt;
    return n;
}

std::string delete_if_created_txn(std::string_view key, std::int64_t create_revision)
{
    return txn({compare_create(key, {}, create_revision)}, {op("request_delete_range", {{"key", base64_encode(key)}})},
               {});
}

bool parse_succeeded(std::string_view body, bool& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    out = succeeded(*o);
    return true;
}

std::string proclaim_txn(std::string_view key, std::int64_t created, std::string_view value, std::int64_t lease)
{
    return txn({compare_create(key, {}, created)}, {put_op(key, value, lease)}, {});
}

std::string predecessor_txn(std::string_view key, std::int64_t mine, std::string_view prefix)
{
    return txn({compare_create(key, {}, mine)},
               {op("request_range", range_op(prefix, prefix_end(prefix), 1, false, mine - 1))}, {});
}

bool parse_predecessor(std::string_view body, predecessor_reply& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    out = {};
    out.revision = header_revision(*o);
    out.mine_exists = succeeded(*o);
    if (out.mine_exists && !first_kv(response_at(*o, 0, "response_range"), out.predecessor))
        return shape_error(err, "predecessor: no range");
    return true;
}

std::string range_request(std::string_view prefix, std::int64_t limit)
{
    return json::serialize(range_op(prefix, prefix_end(prefix), limit, true));
}

bool parse_range(std::string_view body, range_reply& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    out = {};
    out.revision = header_revision(*o);
    if (!get_int(*o, "count", out.count))
        return shape_error(err, "range: bad count");
    if (!all_kvs(o, out.kvs))
        return shape_error(err, "range: bad key-values");
    return true;
}

std::string grant_request(std::int64_t ttl_seconds)
{
    return json::serialize(json::object{{"TTL", std::to_string(ttl_seconds)}, {"ID", "0"}});
}

std::string lease_id_request(std::int64_t id)
{
    return json::serialize(json::object{{"ID", std::to_string(id)}});
}

bool parse_lease(std::string_view body, lease_reply& out, reply_error& err)
{
    // A keepalive answers on its stream: the first line, wrapped in "result".
    auto nl = body.find('\n');
    if (nl != std::string_view::npos && body.find_first_not_of(" \r\n", nl) != std::string_view::npos)
        body = body.substr(0, nl);
    json::value v;
    auto* o = parse_object(body, v, err);
    if (!o)
        return false;
    if (auto* r = o->if_contains("result")) {
        if (!r->is_object())
            return shape_error(err, "lease: result is not an object");
        o = &r->as_object();
        if (o->contains("error") || o->contains("code")) {
            err = classify(500, json::serialize(*o));
            return false;
        }
    }
    out = {};
    if (!get_int(*o, "ID", out.id) || !get_int(*o, "TTL", out.ttl) || !get_int(*o, "grantedTTL", out.granted_ttl))
        return shape_error(err, "lease: bad ID or TTL");
    if (auto* e = o->if_contains("error"); e && e->is_string() && !e->as_string().empty()) {
        err.code = error::server_error;
        err.text = "etcd: " + std::string(e->as_string());
        return false;
    }
    return true;
}

std::string watch_create_request(std::string_view key, std::string_view range_end, std::int64_t start_revision,
                                 bool puts)
{
    json::object c{{"key", base64_encode(key)}};
    if (!puts)
        c["filters"] = json::array{"NOPUT"};
    if (!range_end.empty())
        c["range_end"] = base64_encode(range_end);
    if (start_revision > 0)
        c["start_revision"] = std::to_string(start_revision);
    return json::serialize(json::object{{"create_request", std::move(c)}});
}

bool parse_watch_message(std::string_view line, watch_message& out, reply_error& err)
{
    json::value v;
    auto* o = parse_object(line, v, err);
    if (!o)
        return false;
    out = {};
    auto* r = o->if_contains("result");
    if (!r || !r->is_object())
        return shape_error(err, "watch: no result");
    auto& res = r->as_object();
    out.revision = header_revision(res);
    auto flag = [&](std::string_view f) {
        auto* b = res.if_contains(f);
        return b && b->is_bool() && b->as_bool();
    };
    out.created = flag("created");
    out.canceled = flag("canceled");
    if (!get_int(res, "compact_revision", out.compact_revision))
        return shape_error(err, "watch: bad compact_revision");
    if (auto* evs = res.if_contains("events")) {
        if (!evs->is_array())
            return shape_error(err, "watch: events is not an array");
        for (auto& e : evs->as_array()) {
            auto* eo = e.if_object();
            if (!eo)
                return shape_error(err, "watch: bad event");
            auto* type = eo->if_contains("type");
            bool del = type && type->is_string() && type->as_string() == "DELETE";
            auto* kv = eo->if_contains("kv");
            key_value k;
            if (!kv || !get_kv(*kv, k))
                return shape_error(err, "watch: event without kv");
            if (del)
                out.deleted.push_back(std::move(k));
            else if (k.mod_revision > k.create_revision)
                out.rewritten.push_back(std::move(k));
        }
    }
    return true;
}

}  // namespace dlock::etcd::detail
