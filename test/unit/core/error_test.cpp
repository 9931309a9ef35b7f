// SPDX-License-Identifier: BSL-1.0
// Every store returns the dlock category's codes, so no message names one store or its
// protocol: that store's own words belong in its diagnostics (last_error_text()).
#include <dlock/error.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <cctype>
#include <set>
#include <string>
#include <string_view>

namespace {

// Store names, matched in any case inside a word ("rediss", "PostgreSQL").
constexpr std::array<std::string_view, 10> store_names{"redis", "etcd",     "zookeeper", "postgres", "mariadb",
                                                       "mysql", "memcache", "sentinel",  "redlock",  "lua"};
// Protocol and command words of one store, matched as whole words in upper case.
constexpr std::array<std::string_view, 10> protocol_words{"RESP",   "SQL",     "ACL",    "EVAL", "EVALSHA",
                                                          "SELECT", "SETNAME", "NOPERM", "WAIT", "ZK"};

std::string lower(std::string_view s)
{
    std::string out(s);
    for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool has_word(std::string_view text, std::string_view word)
{
    auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (auto at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
        bool starts = at == 0 || !is_word(text[at - 1]);
        bool ends = at + word.size() == text.size() || !is_word(text[at + word.size()]);
        if (starts && ends)
            return true;
    }
    return false;
}

// Errors that only one store can return by definition (their texts may name it): none now.
const std::set<dlock::error> store_specific{};

}  // namespace

BOOST_AUTO_TEST_SUITE(error_texts)

BOOST_AUTO_TEST_CASE(no_message_names_one_store_or_its_protocol)
{
    const auto& cat = dlock::dlock_category();
    int v = 1;
    for (; cat.message(v) != "unknown dlock error"; ++v) {
        auto e = static_cast<dlock::error>(v);
        auto text = cat.message(v);
        BOOST_TEST_CONTEXT("error " << v << ": " << text)
        {
            BOOST_TEST(!text.empty());
            if (store_specific.count(e))
                continue;
            for (auto name : store_names)
                BOOST_TEST(lower(text).find(name) == std::string::npos, "names " << name);
            for (auto word : protocol_words)
                BOOST_TEST(!has_word(text, word), "says " << word);
            BOOST_TEST(text.find("://") == std::string::npos, "lists URL schemes");
        }
    }
    BOOST_TEST(v > static_cast<int>(dlock::error::count_mismatch));  // every code was read
}

// The three the review named: each says what to do without naming Redis.
BOOST_AUTO_TEST_CASE(the_reviewed_messages_say_what_to_do)
{
    auto msg = [](dlock::error e) { return make_error_code(e).message(); };
    BOOST_TEST(msg(dlock::error::unsupported_scheme).find("scheme of the chosen store") != std::string::npos);
    BOOST_TEST(msg(dlock::error::protocol_error).find("check that the URL points at") != std::string::npos);
    BOOST_TEST(msg(dlock::error::handshake_failed).find("last_error_text()") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
