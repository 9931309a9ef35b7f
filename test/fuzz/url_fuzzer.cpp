// SPDX-License-Identifier: BSL-1.0
// libFuzzer target for every store's URL parser (src/<store>/config.cpp): any text must parse
// or fail with an error code and a message, without crashing, leaking or reading out of
// bounds; what a parser accepts prints back (to_url, redact_url) without the password. The
// first byte picks the parser, the rest is the URL after its scheme (so most inputs reach
// the parser's body).
#include <dlock/etcd/config.hpp>
#include <dlock/mariadb/config.hpp>
#include <dlock/memcached/config.hpp>
#include <dlock/postgres/config.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/zookeeper/config.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

template <class Config, class Error, class Parse>
bool parse(Parse parse_url, const std::string& url, Config& cfg)
{
    Error err;
    bool ok = parse_url(url, cfg, err);
    if (!ok && (!err.code || err.message.empty()))
        __builtin_trap();
    return ok;
}

// A password long enough not to be found by chance must not be printed back (one holding '*'
// could be spelled by the text around the `***` that replaces it).
void hidden(const std::string& password, const std::string& printed)
{
    if (password.size() >= 6 && password.find('*') == std::string::npos && printed.find(password) != std::string::npos)
        __builtin_trap();
}

// to_url prints the same whatever the password is: it never shows it.
template <class Config, class Print>
void unprinted(const Config& cfg, Print to_url)
{
    Config other = cfg;
    other.password = cfg.password + "\x01";
    if (to_url(other) != to_url(cfg))
        __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (data[0] % 8) {
    case 0:
    case 1: {
        std::string url = std::string(data[0] % 2 == 0 ? "redis://" : "rediss://").append(rest);
        dlock::redis::config cfg;
        parse<dlock::redis::config, dlock::redis::config_error>(dlock::redis::parse_url, url, cfg);
        std::string redacted = dlock::redis::redact_url(url);
        // Without %-escapes the password is the text between the user's ':' and the last '@'.
        if (url.find('%') == std::string::npos && !cfg.password.empty() &&
            url.find(cfg.password) == url.rfind(cfg.password))
            hidden(cfg.password, redacted);
        break;
    }
    case 2: {
        std::string url = std::string("redis+sentinel://").append(rest);
        dlock::redis::config cfg;
        parse<dlock::redis::config, dlock::redis::config_error>(dlock::redis::parse_url, url, cfg);
        (void)dlock::redis::redact_url(url);
        break;
    }
    case 3: {
        dlock::etcd::config cfg;
        if (parse<dlock::etcd::config, dlock::etcd::config_error>(dlock::etcd::parse_url,
                                                                  std::string("etcd://").append(rest), cfg))
            (void)dlock::etcd::to_url(cfg);
        break;
    }
    case 4: {
        dlock::memcached::config cfg;
        if (parse<dlock::memcached::config, dlock::memcached::config_error>(
                dlock::memcached::parse_url, std::string("memcached://").append(rest), cfg))
            (void)dlock::memcached::to_url(cfg);
        break;
    }
    case 5: {
        dlock::zookeeper::config cfg;
        if (parse<dlock::zookeeper::config, dlock::zookeeper::config_error>(dlock::zookeeper::parse_url,
                                                                            std::string("zk://").append(rest), cfg))
            (void)dlock::zookeeper::to_url(cfg);
        break;
    }
    case 6: {
        dlock::postgres::config cfg;
        if (parse<dlock::postgres::config, dlock::postgres::config_error>(
                dlock::postgres::parse_url, std::string("postgresql://").append(rest), cfg))
            unprinted(cfg, [](auto& c) { return dlock::postgres::to_url(c); });
        break;
    }
    case 7: {
        dlock::mariadb::config cfg;
        if (parse<dlock::mariadb::config, dlock::mariadb::config_error>(
                dlock::mariadb::parse_url, std::string("mariadb://").append(rest), cfg))
            unprinted(cfg, [](auto& c) { return dlock::mariadb::to_url(c); });
        break;
    }
    }
    return 0;
}
