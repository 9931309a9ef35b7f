// SPDX-License-Identifier: BSL-1.0
// The gateway's JSON pieces the codecs build requests from and read replies with: int64 as
// strings, bytes in base64, Txn compares and operations (codec.cpp, latch_codec.cpp).
#pragma once

#include "etcd/codec.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace dlock::etcd::detail {

namespace json = boost::json;

// ---- reading replies ----
bool get_int(const json::object& o, std::string_view field, std::int64_t& out);
bool get_bytes(const json::object& o, std::string_view field, std::string& out);
bool get_kv(const json::value& v, key_value& out);
/// Sets a protocol_error naming `what`; false.
bool shape_error(reply_error& err, std::string what);
/// The reply's object, or null with `err` set (a gateway error body gets its own code).
const json::object* parse_object(std::string_view body, json::value& storage, reply_error& err);
bool succeeded(const json::object& o);
std::int64_t header_revision(const json::object& o);
/// The `i`th response of a Txn reply, if it is a `field` (response_range, ...).
const json::object* response_at(const json::object& o, std::size_t i, std::string_view field);
/// Every key-value of a range reply, in its order.
bool all_kvs(const json::object* range, std::vector<key_value>& out);
bool first_kv(const json::object* range, std::optional<key_value>& out);

// ---- building requests ----
/// A range request; `limit` 0 = all; sorted by create revision (`ascend`, else descending);
/// `max_create` > 0 keeps only keys created at or before it.
json::object range_op(std::string_view key, std::string_view end, std::int64_t limit, bool ascend,
                      std::int64_t max_create = 0);
/// How many keys start with `prefix` (a count-only range).
json::object count_range_op(std::string_view prefix);
json::object op(std::string_view kind, json::object body);
json::object compare_create(std::string_view key, std::string_view end, std::int64_t rev);
json::object compare_value(std::string_view key, std::string_view value);
json::object put_op(std::string_view key, std::string_view value, std::int64_t lease);
std::string txn(json::array compare, json::array success, json::array failure);

}  // namespace dlock::etcd::detail
