// SPDX-License-Identifier: BSL-1.0
// RESP2 decoder (sans-io, over hiredis's reader) and request encoding: no server.
#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/redis/request.hpp>
#include <dlock/redis/script.hpp>

#include "redis/eval_request.hpp"
#include "redis/resp/decoder.hpp"
#include "unit/print.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using boost::system::error_code;
using dlock::redis::reply;
using dlock::redis::reply_type;
using dlock::redis::request;
using dlock::resp::decoder;

namespace {

reply str(std::string s)
{
    return {reply_type::string, 0, std::move(s), {}};
}
reply status(std::string s)
{
    return {reply_type::status, 0, std::move(s), {}};
}
reply err(std::string s)
{
    return {reply_type::error, 0, std::move(s), {}};
}
reply integer(long long v)
{
    return {reply_type::integer, v, {}, {}};
}
reply nil()
{
    return {};
}
reply array(std::vector<reply> e)
{
    return {reply_type::array, 0, {}, std::move(e)};
}

// Feeds `bytes` in one piece and drains every complete reply; fails the test on error.
std::vector<reply> decode_all(decoder& d, std::string_view bytes)
{
    d.feed(bytes);
    std::vector<reply> out;
    error_code ec;
    while (auto r = d.next(ec))
        out.push_back(std::move(*r));
    BOOST_TEST(!ec, ec.message());
    return out;
}

std::vector<reply> decode_all(std::string_view bytes)
{
    decoder d;
    return decode_all(d, bytes);
}

// Feeds one byte at a time, asking for replies after each: a reply must appear exactly when
// its last byte arrives, never earlier.
std::vector<reply> decode_bytewise(std::string_view bytes, std::vector<std::size_t>* completed_at = nullptr)
{
    decoder d;
    std::vector<reply> out;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        d.feed(bytes.substr(i, 1));
        error_code ec;
        while (auto r = d.next(ec)) {
            out.push_back(std::move(*r));
            if (completed_at)
                completed_at->push_back(i + 1);
        }
        BOOST_TEST_REQUIRE(!ec, "at byte " << i << ": " << ec.message());
    }
    return out;
}

// Feeds until the decoder reports an error; returns it (empty if none).
error_code decode_error(std::string_view bytes)
{
    decoder d;
    d.feed(bytes);
    error_code ec;
    for (int i = 0; i < 100; ++i) {
        auto r = d.next(ec);
        if (ec || !r)
            break;
    }
    return ec;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(decoder_suite)

BOOST_AUTO_TEST_CASE(simple_types)
{
    auto rs = decode_all("+OK\r\n$5\r\nhello\r\n:42\r\n:-7\r\n:0\r\n$0\r\n\r\n-ERR bad thing\r\n");
    BOOST_TEST_REQUIRE(rs.size() == 7u);
    BOOST_TEST(rs[0] == status("OK"));
    BOOST_TEST(rs[1] == str("hello"));
    BOOST_TEST(rs[2] == integer(42));
    BOOST_TEST(rs[3] == integer(-7));
    BOOST_TEST(rs[4] == integer(0));
    BOOST_TEST(rs[5] == str(""));
    BOOST_TEST(rs[6] == err("ERR bad thing"));
    BOOST_TEST(rs[6].is_error());
}

BOOST_AUTO_TEST_CASE(integer_limits)
{
    auto rs = decode_all(":9223372036854775807\r\n:-9223372036854775807\r\n");
    BOOST_TEST_REQUIRE(rs.size() == 2u);
    BOOST_TEST(rs[0].integer == INT64_MAX);
    BOOST_TEST(rs[1].integer == -INT64_MAX);
}

BOOST_AUTO_TEST_CASE(error_replies)
{
    auto rs = decode_all("-NOSCRIPT No matching script. Please use EVAL.\r\n"
                         "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
                         "*2\r\n-ERR inner\r\n+OK\r\n");
    BOOST_TEST_REQUIRE(rs.size() == 3u);
    BOOST_TEST(rs[0] == err("NOSCRIPT No matching script. Please use EVAL."));
    BOOST_TEST(rs[1].type == reply_type::error);
    BOOST_TEST(rs[1].str.rfind("WRONGPASS", 0) == 0u);
    // An error inside an array (EXEC results) stays an element, not a decoder error.
    BOOST_TEST(rs[2] == array({err("ERR inner"), status("OK")}));
}

BOOST_AUTO_TEST_CASE(nil_bulk_and_nil_array)
{
    auto rs = decode_all("$-1\r\n*-1\r\n*0\r\n*3\r\n$-1\r\n*-1\r\n$1\r\nx\r\n");
    BOOST_TEST_REQUIRE(rs.size() == 4u);
    BOOST_TEST(rs[0].is_nil());
    BOOST_TEST(rs[1].is_nil());
    BOOST_TEST(rs[2] == array({}));  // empty array is not nil
    BOOST_TEST(rs[2].type == reply_type::array);
    BOOST_TEST(rs[3] == array({nil(), nil(), str("x")}));
}

BOOST_AUTO_TEST_CASE(nested_arrays)
{
    // [[1, [a, nil]], [], OK, [[[deep]]]]
    std::string wire = "*4\r\n"
                       "*2\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n"
                       "*0\r\n"
                       "+OK\r\n"
                       "*1\r\n*1\r\n*1\r\n$4\r\ndeep\r\n";
    reply expected = array({array({integer(1), array({str("a"), nil()})}), array({}), status("OK"),
                            array({array({array({str("deep")})})})});
    auto whole = decode_all(wire);
    BOOST_TEST_REQUIRE(whole.size() == 1u);
    BOOST_TEST(whole[0] == expected);
    auto split = decode_bytewise(wire);
    BOOST_TEST_REQUIRE(split.size() == 1u);
    BOOST_TEST(split[0] == expected);
}

BOOST_AUTO_TEST_CASE(deepest_supported_nesting)
{
    // hiredis 0.14 keeps 9 read tasks: 7 nested arrays around a leaf decode...
    std::string ok;
    for (int i = 0; i < 7; ++i)
        ok += "*1\r\n";
    ok += ":5\r\n";
    auto rs = decode_all(ok);
    BOOST_TEST_REQUIRE(rs.size() == 1u);
    const reply* r = &rs[0];
    for (int i = 0; i < 7; ++i) {
        BOOST_TEST_REQUIRE(r->type == reply_type::array);
        BOOST_TEST_REQUIRE(r->elements.size() == 1u);
        r = &r->elements[0];
    }
    BOOST_TEST(*r == integer(5));

    // ...deeper is a protocol error, reported and not crashed on.
    std::string deep;
    for (int i = 0; i < 12; ++i)
        deep += "*1\r\n";
    deep += ":5\r\n";
    BOOST_TEST(decode_error(deep) == dlock::error::protocol_error);
}

BOOST_AUTO_TEST_CASE(split_packets_byte_by_byte)
{
    std::string wire = "+PONG\r\n$12\r\nhello\r\nworld\r\n:12345\r\n-ERR x\r\n$-1\r\n*2\r\n$3\r\nfoo\r\n:7\r\n";
    std::vector<std::size_t> at;
    auto rs = decode_bytewise(wire, &at);
    BOOST_TEST_REQUIRE(rs.size() == 6u);
    BOOST_TEST(rs[0] == status("PONG"));
    BOOST_TEST(rs[1] == str("hello\r\nworld"));  // CRLF inside a bulk string is data
    BOOST_TEST(rs[2] == integer(12345));
    BOOST_TEST(rs[3] == err("ERR x"));
    BOOST_TEST(rs[4].is_nil());
    BOOST_TEST(rs[5] == array({str("foo"), integer(7)}));
    // Each reply appears with its own last byte.
    std::vector<std::size_t> ends;
    std::size_t pos = 0;
    for (std::string_view piece : {"+PONG\r\n", "$12\r\nhello\r\nworld\r\n", ":12345\r\n", "-ERR x\r\n", "$-1\r\n",
                                   "*2\r\n$3\r\nfoo\r\n:7\r\n"}) {
        pos += piece.size();
        ends.push_back(pos);
    }
    BOOST_TEST(at == ends, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_split_point)
{
    // Two replies cut into two pieces at every position.
    std::string wire = "*3\r\n$3\r\nSET\r\n:-12\r\n$-1\r\n+OK\r\n";
    for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
        decoder d;
        std::vector<reply> rs;
        error_code ec;
        d.feed(std::string_view(wire).substr(0, cut));
        while (auto r = d.next(ec))
            rs.push_back(std::move(*r));
        BOOST_TEST_REQUIRE(!ec);
        d.feed(std::string_view(wire).substr(cut));
        while (auto r = d.next(ec))
            rs.push_back(std::move(*r));
        BOOST_TEST_REQUIRE(!ec);
        BOOST_TEST_REQUIRE(rs.size() == 2u, "cut at " << cut);
        BOOST_TEST(rs[0] == array({str("SET"), integer(-12), nil()}));
        BOOST_TEST(rs[1] == status("OK"));
    }
}

BOOST_AUTO_TEST_CASE(binary_bulk_string)
{
    std::string payload("a\0b\r\n\xff\x00z", 8);
    std::string wire = "$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";
    auto rs = decode_bytewise(wire);
    BOOST_TEST_REQUIRE(rs.size() == 1u);
    BOOST_TEST(rs[0].str.size() == 8u);
    BOOST_TEST(rs[0].str == payload);
}

BOOST_AUTO_TEST_CASE(huge_bulk_string)
{
    constexpr std::size_t size = 16u << 20;  // 16 MiB
    std::string payload(size, '\0');
    for (std::size_t i = 0; i < size; ++i)
        payload[i] = static_cast<char>('a' + i % 26);
    std::string wire = "$" + std::to_string(size) + "\r\n" + payload + "\r\n+AFTER\r\n";

    decoder d;
    error_code ec;
    std::vector<reply> rs;
    // 64 KiB chunks, as the connection reads them; nothing completes before the last chunk.
    constexpr std::size_t chunk = 64 * 1024;
    for (std::size_t off = 0; off < wire.size(); off += chunk) {
        d.feed(std::string_view(wire).substr(off, chunk));
        while (auto r = d.next(ec))
            rs.push_back(std::move(*r));
        BOOST_TEST_REQUIRE(!ec);
        if (off + chunk < size)
            BOOST_TEST_REQUIRE(rs.empty());
    }
    BOOST_TEST_REQUIRE(rs.size() == 2u);
    BOOST_TEST(rs[0].type == reply_type::string);
    BOOST_TEST(rs[0].str.size() == size);
    BOOST_TEST((rs[0].str == payload));
    BOOST_TEST(rs[1] == status("AFTER"));
}

BOOST_AUTO_TEST_CASE(large_array)
{
    std::string wire = "*10000\r\n";
    for (int i = 0; i < 10000; ++i)
        wire += ":" + std::to_string(i) + "\r\n";
    auto rs = decode_all(wire);
    BOOST_TEST_REQUIRE(rs.size() == 1u);
    BOOST_TEST_REQUIRE(rs[0].elements.size() == 10000u);
    for (int i = 0; i < 10000; ++i)
        BOOST_TEST_REQUIRE(rs[0].elements[static_cast<std::size_t>(i)].integer == i);
}

BOOST_AUTO_TEST_CASE(garbage_is_protocol_error)
{
    using dlock::error;
    // Not a RESP type byte.
    BOOST_TEST(decode_error("hello\r\n") == error::protocol_error);
    BOOST_TEST(decode_error(std::string("\0\0\0\0", 4)) == error::protocol_error);
    BOOST_TEST(decode_error("GET / HTTP/1.1\r\n") == error::protocol_error);
    // A bulk string longer than announced leaves garbage where the next reply should start.
    BOOST_TEST(decode_error("$3\r\nabcd\r\n") == error::protocol_error);
    // Garbage after a good reply: the good one comes out first.
    {
        decoder d;
        d.feed("+OK\r\n!!!\r\n");
        error_code ec;
        auto r = d.next(ec);
        BOOST_TEST_REQUIRE(!ec);
        BOOST_TEST_REQUIRE(r.has_value());
        BOOST_TEST(*r == status("OK"));
        r = d.next(ec);
        BOOST_TEST(ec == error::protocol_error);
        BOOST_TEST(!r.has_value());
        // The error sticks until reset(): the stream position is lost.
        r = d.next(ec);
        BOOST_TEST(ec == error::protocol_error);
        d.feed("+OK\r\n");
        r = d.next(ec);
        BOOST_TEST(ec == error::protocol_error);
        d.reset();
        r = d.next(ec);
        BOOST_TEST(!ec);
        BOOST_TEST(!r.has_value());
        d.feed("+OK\r\n");
        r = d.next(ec);
        BOOST_TEST(!ec);
        BOOST_TEST_REQUIRE(r.has_value());
        BOOST_TEST(*r == status("OK"));
    }
    // Garbage inside an array: the partly built tree is freed, no crash, no leak (ASan).
    BOOST_TEST(decode_error("*3\r\n:1\r\n*2\r\n$1\r\na\r\n?\r\n") == error::protocol_error);
}

BOOST_AUTO_TEST_CASE(hostile_lengths_do_not_crash)
{
    using dlock::error;
    // Negative or out-of-range element counts are errors, never allocations.
    for (std::string_view wire : {"*-2\r\n", "*-100\r\n:1\r\n", "*2\r\n*-5\r\n:1\r\n", "*4294967295\r\n",
                                  "*2147483648\r\n", "*-2147483649\r\n"}) {
        BOOST_TEST_CONTEXT("wire " << wire)
        {
            decoder d;
            d.feed(wire);
            error_code ec;
            auto r = d.next(ec);
            // Either a protocol error or "need more bytes"; never a reply that is not there.
            BOOST_TEST((ec == error::protocol_error || (!ec && !r)));
        }
    }
    // A huge count within range only waits for more bytes: nothing is allocated up front
    // (pre-sizing the array from it used to throw std::bad_alloc through hiredis).
    {
        decoder d;
        d.feed("*2000000000\r\n:1\r\n");
        error_code ec;
        auto r = d.next(ec);
        BOOST_TEST(!ec);
        BOOST_TEST(!r.has_value());
    }
}

BOOST_AUTO_TEST_CASE(reset_drops_partial_input)
{
    decoder d;
    d.feed("$10\r\nabc");
    error_code ec;
    BOOST_TEST(!d.next(ec).has_value());
    BOOST_TEST(!ec);
    d.reset();
    d.feed(":1\r\n");
    auto r = d.next(ec);
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(*r == integer(1));
}

BOOST_AUTO_TEST_CASE(many_small_replies_in_one_feed)
{
    std::string wire;
    for (int i = 0; i < 5000; ++i)
        wire += "$" + std::to_string(std::to_string(i).size()) + "\r\n" + std::to_string(i) + "\r\n";
    auto rs = decode_all(wire);
    BOOST_TEST_REQUIRE(rs.size() == 5000u);
    for (int i = 0; i < 5000; ++i)
        BOOST_TEST_REQUIRE(rs[static_cast<std::size_t>(i)].str == std::to_string(i));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(request_encoding_suite)

// A script call's tail: numkeys, then each value as a bulk string; a key given in parts is
// one bulk string of their concatenation (empty parts, empty values and binary bytes too).
BOOST_AUTO_TEST_CASE(script_args_encode_numkeys_then_values)
{
    dlock::redis::script_args a(2, 0);
    std::string_view prefix = "{t}ns";
    std::string binary("a\0\r\nb", 5);
    a.add({prefix, ":lock:", "", "n"}).add({prefix, ":fence"}).add(binary).add("").add(-30000LL);
    BOOST_TEST(a.count() == 5u);
    BOOST_TEST(a.keys() == 2u);
    BOOST_TEST(a.encoded() == "$1\r\n2\r\n$12\r\n{t}ns:lock:n\r\n$11\r\n{t}ns:fence\r\n$5\r\n" + binary +
                                  "\r\n$0\r\n\r\n$6\r\n-30000\r\n");
    // The same values through the request encoder: the bytes a plain EVALSHA would carry.
    std::string expect;
    request::encode_arg(expect, "2");
    for (std::string_view v : {std::string_view("{t}ns:lock:n"), std::string_view("{t}ns:fence"),
                               std::string_view(binary), std::string_view(""), std::string_view("-30000")})
        request::encode_arg(expect, v);
    BOOST_TEST(a.encoded() == expect);
}

// The whole call in one string: EVALSHA with a SHA1, EVAL with a long body, a
// three-digit argument count; each the bytes the request encoder gives, and `head` where
// the values start (the NOSCRIPT fallback resends the values from there).
BOOST_AUTO_TEST_CASE(script_args_take_the_whole_command)
{
    auto make = [] {
        dlock::redis::script_args a(1);
        a.add({"{t}ns", ":lock:", "n"}).add("tok").add(30000LL);
        return a;
    };
    auto expect = [](std::string_view command, std::string_view first) {
        request req;
        req.push(command, first, "1", "{t}ns:lock:n", "tok", "30000");
        return req.payload();
    };
    const std::string sha(40, 'a');
    std::size_t head = 0;
    std::string evalsha = make().take_command("EVALSHA", sha, head);
    BOOST_TEST(evalsha == expect("EVALSHA", sha));
    BOOST_TEST(head == evalsha.size() - make().encoded().size());
    BOOST_TEST(evalsha.substr(head) == make().encoded());

    const std::string body(300, 'x');
    std::string eval = make().take_command("EVAL", body, head);
    BOOST_TEST(eval == expect("EVAL", body));
    BOOST_TEST(eval.substr(head) == make().encoded());

    dlock::redis::script_args many(0);
    request req;
    std::vector<std::string> args{"EVALSHA", sha, "0"};
    for (int i = 0; i < 150; ++i) {
        many.add(static_cast<long long>(i));
        args.push_back(std::to_string(i));
    }
    req.push_range(args[0], std::span<const std::string>(args).subspan(1));
    const std::string values(many.encoded());
    std::string whole = std::move(many).take_command("EVALSHA", sha, head);
    BOOST_TEST(whole == req.payload());
    BOOST_TEST(whole.substr(head) == values);

    // ping_first: a PING, then the same command; `head` still finds the values.
    request pinged;
    pinged.push("PING").push("EVALSHA", sha, "1", "{t}ns:lock:n", "tok", "30000");
    auto p = make();
    p.ping_first();
    BOOST_TEST(p.pings_first());
    std::string with_ping = std::move(p).take_command("EVALSHA", sha, head);
    BOOST_TEST(with_ping == pinged.payload());
    BOOST_TEST(with_ping.substr(head) == make().encoded());
}

BOOST_AUTO_TEST_CASE(single_command)
{
    request req;
    BOOST_TEST(req.empty());
    req.push("SET", "key", "value");
    BOOST_TEST(req.size() == 1u);
    BOOST_TEST(!req.empty());
    BOOST_TEST(req.payload() == "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
}

BOOST_AUTO_TEST_CASE(integer_arguments)
{
    request req;
    req.push("SET", "k", "v", "PX", 30000);
    req.push("INCRBY", "n", -5);
    req.push("X", std::uint64_t{18446744073709551615u}, std::int64_t{INT64_MIN}, 0, short{7});
    BOOST_TEST(req.size() == 3u);
    BOOST_TEST(req.payload() == "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nPX\r\n$5\r\n30000\r\n"
                                "*3\r\n$6\r\nINCRBY\r\n$1\r\nn\r\n$2\r\n-5\r\n"
                                "*5\r\n$1\r\nX\r\n$20\r\n18446744073709551615\r\n$20\r\n-9223372036854775808\r\n"
                                "$1\r\n0\r\n$1\r\n7\r\n");
}

BOOST_AUTO_TEST_CASE(binary_safe_arguments)
{
    std::string bin("\0\r\n$*\xff", 6);
    request req;
    req.push("SET", bin, std::string_view("a\0b", 3), std::string());
    std::string expected = "*4\r\n$3\r\nSET\r\n$6\r\n" + bin + "\r\n$3\r\n" + std::string("a\0b", 3) + "\r\n$0\r\n\r\n";
    BOOST_TEST(req.payload().size() == 40u);
    BOOST_TEST((req.payload() == expected));

    // The encoding round-trips through the decoder (RESP requests are arrays of bulk strings).
    auto rs = decode_all(req.payload());
    BOOST_TEST_REQUIRE(rs.size() == 1u);
    BOOST_TEST(rs[0] == array({str("SET"), str(bin), str(std::string("a\0b", 3)), str("")}));
}

BOOST_AUTO_TEST_CASE(push_range_and_clear)
{
    std::vector<std::string> args = {"sha", "2", "k1", "k2", std::string(1000, 'x')};
    request req;
    req.push_range("EVALSHA", args);
    req.push("PING");
    BOOST_TEST(req.size() == 2u);
    auto rs = decode_all(req.payload());
    BOOST_TEST_REQUIRE(rs.size() == 2u);
    BOOST_TEST_REQUIRE(rs[0].elements.size() == 6u);
    BOOST_TEST(rs[0].elements[0].str == "EVALSHA");
    BOOST_TEST(rs[0].elements[5].str == args[4]);
    BOOST_TEST(rs[1] == array({str("PING")}));

    req.clear();
    BOOST_TEST(req.empty());
    BOOST_TEST(req.size() == 0u);
    BOOST_TEST(req.payload().empty());
    std::vector<std::string> none;
    req.push_range("PING", none);
    BOOST_TEST(req.payload() == "*1\r\n$4\r\nPING\r\n");
}

// A script call is encoded once (keys and arguments), then as EVALSHA or, after NOSCRIPT,
// as EVAL with the body: both the same bytes push_range would make, the ASKING in front kept.
BOOST_AUTO_TEST_CASE(script_call_encoded_once_for_both_forms)
{
    dlock::redis::script sc("return {KEYS[1], ARGV[1]}");
    std::vector<std::string> keys = {"{t}k1", std::string("k\0\r\n2", 5)}, args = {"tok", std::string(300, 'y'), ""};
    for (bool asking : {false, true}) {
        dlock::redis::detail::eval_request call(sc, keys, args, asking);
        std::vector<std::string> tail = {"2", keys[0], keys[1], args[0], args[1], args[2]};
        for (bool by_body : {false, true}) {
            request want;
            if (asking)
                want.push("ASKING");
            tail.insert(tail.begin(), by_body ? sc.body() : sc.sha1());
            want.push_range(by_body ? "EVAL" : "EVALSHA", tail);
            tail.erase(tail.begin());
            auto got = by_body ? call.reload() : call.first(false);
            BOOST_TEST(got.payload() == want.payload());
            BOOST_TEST(got.size() == want.size());
        }
        BOOST_TEST(call.first(true).payload() == call.reload().payload());  // load: EVAL
    }
    request r;
    r.push("PING");
    auto bytes = r.take_payload();
    BOOST_TEST(bytes == "*1\r\n$4\r\nPING\r\n");
    BOOST_TEST(r.empty());
}

BOOST_AUTO_TEST_SUITE_END()
