// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/zookeeper/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"


namespace dlock::zookeeper {

using detail::fail;

namespace {

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    auto duration = [&](std::chrono::milliseconds& field) {
        return detail::duration_option("zk URL", key, value, field, err, true);
    };
    if (key == "session_timeout")
        return duration(out.session_timeout);
    if (key == "connect_timeout")
        return duration(out.connect_timeout);
    if (key == "root") {
        if (auto why = check_path(value); !why.empty())
            return fail(err, error::invalid_option, "zk URL: option 'root': " + why);
        out.root = std::string(value);
        return true;
    }
    return fail(err, error::invalid_option,
                "zk URL: unknown option '" + std::string(key) + "' (known: root, session_timeout, connect_timeout)");
}

}  // namespace

std::string check_path(std::string_view path)
{
    if (path.empty() || path.front() != '/')
        return "'" + std::string(path) + "' is not an absolute path (it must start with '/')";
    if (path.size() > 1 && path.back() == '/')
        return "'" + std::string(path) + "' ends with '/'";
    for (unsigned char c : path)
        if (c < 0x20 || c == 0x7f)
            return "a path may not hold control characters or NUL";
    std::string_view rest = path.substr(1);
    while (path.size() > 1) {
        auto slash = rest.find('/');
        auto part = rest.substr(0, slash);
        if (part.empty())
            return "'" + std::string(path) + "' has an empty component ('//')";
        if (part == "." || part == "..")
            return "'" + std::string(path) + "' has a '.' or '..' component";
        if (slash == std::string_view::npos)
            break;
        rest = rest.substr(slash + 1);
    }
    return {};
}

bool parse_url(std::string_view url, config& out, config_error& err)
{
    static constexpr detail::list_url_form form{
        "zk://", "zookeeper://", "a ZooKeeper", "zk://host:port[,host:port...][/chroot]", "zk URL", "", "server", 2181};
    auto chroot = [&](config& c, std::string_view p) {
        if (p == "/")
            p = {};
        if (auto why = p.empty() ? std::string() : check_path(p); !why.empty())
            return fail(err, error::invalid_url, "zk URL: chroot " + why);
        c.chroot = std::string(p);
        return true;
    };
    return detail::parse_list_url(url, form, out, &config::servers, chroot, parse_option, err);
}

std::string to_url(const config& cfg)
{
    auto s = "zk://" + detail::host_list(cfg.servers);
    return s + cfg.chroot;
}

}  // namespace dlock::zookeeper
