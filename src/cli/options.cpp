// SPDX-License-Identifier: BSL-1.0
#include "cli/options.hpp"

#include <dlock/lock.hpp>
#include <dlock/version.hpp>

#include "cli/exit_status.hpp"
#include "redis/node_list.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <map>

namespace dlock::cli {

namespace {

bool fail(parse_error& err, std::string msg)
{
    err.message = std::move(msg);
    return false;
}

// Flags and the commands that accept them; `takes_value` flags read the next argument.
struct flag_spec {
    const char* name;
    bool takes_value;
    const char* commands;  // letters: r = run, l = elect, s = status, e = release
};

constexpr flag_spec flags[] = {
    {"--url", true, "rlse"},
    {"--config", true, "rlse"},
    {"--prefix", true, "rlse"},
    {"--lease", true, "rl"},
    {"--wait", true, "r"},
    {"--no-watchdog", false, "rl"},
    {"--grace", true, "rl"},
    {"--conflict-exit-code", true, "r"},
    {"--json", false, "sl"},
    {"--force", false, "e"},
    {"--verbose", false, "rlse"},
    {"--cluster", false, "rlse"},
    {"--no-scripting", false, "rlse"},
    {"--value", true, "l"},
    {"--observe", false, "l"},
    {"--rejoin", false, "l"},
    {"--shared", false, "re"},
    {"--exclusive", false, "re"},
    {"--permits", true, "r"},
};

char command_letter(command c)
{
    switch (c) {
    case command::run: return 'r';
    case command::elect: return 'l';
    case command::status: return 's';
    case command::release: return 'e';
    default: return '?';
    }
}

const char* command_name(command c)
{
    switch (c) {
    case command::run: return "run";
    case command::elect: return "elect";
    case command::status: return "status";
    case command::release: return "release";
    default: return "dlock";
    }
}

// A duration as redis::parse_duration reads it, except that one too large to count in
// milliseconds saturates to milliseconds::max(): --wait takes that as "forever", and the
// bounded options refuse it by name.
bool duration(std::string_view what, const std::string& text, std::chrono::milliseconds& out, parse_error& err)
{
    if (redis::parse_duration(text, out))
        return true;
    auto digits = text.find_first_not_of("0123456789");
    std::string_view unit = digits == std::string::npos ? std::string_view() : std::string_view(text).substr(digits);
    if (digits != 0 && (unit.empty() || unit == "ms" || unit == "s" || unit == "m" || unit == "h")) {
        out = std::chrono::milliseconds::max();
        return true;
    }
    return fail(err, std::string(what) + " '" + text + "': expected a duration such as 500ms, 30s, 2m or 1h");
}

// A lease or grace period: beyond max_duration it is refused, naming `what` and the maximum.
bool within_max(std::string_view what, const std::string& text, std::chrono::milliseconds d, parse_error& err)
{
    if (d > max_duration)
        return fail(err, std::string(what) + " '" + text + "': longer than the maximum, " +
                             std::to_string(max_duration.count()) + "ms (about 2,230 years)");
    return true;
}

bool bounded_duration(std::string_view what, const std::string& text, std::chrono::milliseconds& out, parse_error& err)
{
    std::chrono::milliseconds d{};
    if (!duration(what, text, d, err) || !within_max(what, text, d, err))
        return false;
    out = d;
    return true;
}

bool exit_code(std::string_view what, const std::string& text, int& out, parse_error& err)
{
    int v = -1;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || v < 0 || v > 255)
        return fail(err, std::string(what) + " '" + text + "': expected a number from 0 to 255");
    out = v;
    return true;
}

// A JSON duration: "2s" or a number of milliseconds.
bool json_duration(const std::string& file, std::string_view key, const boost::json::value& v,
                   std::chrono::milliseconds& out, parse_error& err)
{
    if (v.is_string())
        return duration(file + ": \"" + std::string(key) + "\"", std::string(v.as_string()), out, err);
    if (v.is_int64() && v.as_int64() >= 0) {
        out = std::chrono::milliseconds(v.as_int64());
        return true;
    }
    return fail(err, file + ": \"" + std::string(key) + "\": expected a duration such as \"30s\" or milliseconds");
}

// Applies a --config file: fields the flags did not set.
bool apply_file(const std::string& path, const std::string& text, const std::map<std::string, std::string>& set,
                options& out, boost::json::object& redis_obj, bool& have_redis, parse_error& err)
{
    boost::system::error_code ec;
    auto doc = boost::json::parse(text, ec);
    if (ec)
        return fail(err, path + ": not valid JSON (" + ec.message() + ")");
    if (!doc.is_object())
        return fail(err, path + ": expected a JSON object");
    auto flag_set = [&](const char* f) { return set.count(f) != 0; };
    for (const auto& [k, v] : doc.as_object()) {
        std::string key(k);
        if (key == "url") {
            std::string url;
            if (v.is_string()) {
                url = std::string(v.as_string());
            } else if (v.is_array() && !v.as_array().empty()) {
                for (const auto& e : v.as_array()) {
                    if (!e.is_string())
                        return fail(err, path + ": \"url\": expected a string or an array of strings");
                    url += (url.empty() ? "" : ",") + std::string(e.as_string());
                }
            } else {
                return fail(err, path + ": \"url\": expected a string or an array of strings");
            }
            if (!flag_set("--url"))
                out.url = std::move(url);
        } else if (key == "cluster") {
            if (!v.is_bool())
                return fail(err, path + ": \"cluster\": expected true or false");
            if (!flag_set("--cluster") && v.as_bool())
                out.topology = topology::cluster;
        } else if (key == "redis") {
            if (!v.is_object())
                return fail(err, path + ": \"redis\": expected an object of connection settings");
            redis_obj = v.as_object();
            have_redis = true;
        } else if (key == "prefix") {
            if (!v.is_string())
                return fail(err, path + ": \"prefix\": expected a string");
            if (!flag_set("--prefix"))
                out.prefix = std::string(v.as_string());
        } else if (key == "lease" || key == "grace") {
            std::chrono::milliseconds d{};
            if (!json_duration(path, key, v, d, err) ||
                !within_max(path + ": \"" + key + "\"", boost::json::serialize(v), d, err))
                return false;
            if (!flag_set(("--" + key).c_str()))
                (key == "lease" ? out.lease : out.grace) = d;
        } else if (key == "wait") {
            std::chrono::milliseconds d{};
            if (v.is_null())
                continue;  // null: wait forever
            if (!json_duration(path, key, v, d, err))
                return false;
            if (!flag_set("--wait"))
                out.wait = d;
        } else if (key == "watchdog") {
            if (!v.is_bool())
                return fail(err, path + ": \"watchdog\": expected true or false");
            if (!flag_set("--no-watchdog"))
                out.watchdog = v.as_bool();
        } else if (key == "scripting") {
            if (!v.is_bool())
                return fail(err, path + ": \"scripting\": expected true or false");
            if (!flag_set("--no-scripting"))
                out.scripting = v.as_bool();
        } else if (key == "conflict_exit_code") {
            if (!v.is_int64() || v.as_int64() < 0 || v.as_int64() > 255)
                return fail(err, path + ": \"conflict_exit_code\": expected a number from 0 to 255");
            if (!flag_set("--conflict-exit-code"))
                out.conflict_exit_code = static_cast<int>(v.as_int64());
        } else {
            return fail(err,
                        path + ": unknown field \"" + key +
                            "\" (known: url, cluster, redis, prefix, lease, wait, watchdog, grace, conflict_exit_code, "
                            "scripting)");
        }
    }
    return true;
}

}  // namespace

bool parse(const std::vector<std::string>& args, options& out, parse_error& err,
           const std::function<const char*(const char*)>& getenv, const file_reader& read)
{
    out = options{};
    if (args.empty())
        return fail(err, "missing command: run, elect, status or release (try dlock --help)");
    const std::string& c = args[0];
    if (c == "-h" || c == "--help" || c == "help") {
        out.cmd = command::help;
        if (args.size() > 1)
            out.help_topic = args[1];
        return true;
    }
    if (c == "--version" || c == "version") {
        out.cmd = command::version;
        if (args.size() > 1)
            return fail(err, "--version takes no arguments");
        return true;
    }
    if (c == "run")
        out.cmd = command::run;
    else if (c == "elect")
        out.cmd = command::elect;
    else if (c == "status")
        out.cmd = command::status;
    else if (c == "release")
        out.cmd = command::release;
    else
        return fail(err, "unknown command '" + c + "': expected run, elect, status or release (try dlock --help)");

    // Pass 1: collect flags, the name and the command line.
    std::map<std::string, std::string> set;
    std::vector<std::string> positional;
    std::size_t i = 1;
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a == "-h" || a == "--help") {
            out.cmd = command::help;
            out.help_topic = c;
            return true;
        }
        if (a.size() > 1 && a[0] == '-') {
            std::string flag = a, value;
            bool inline_value = false;
            if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
                flag = a.substr(0, eq);
                value = a.substr(eq + 1);
                inline_value = true;
            }
            if (flag == "-v")
                flag = "--verbose";
            const flag_spec* spec = nullptr;
            for (const auto& f : flags)
                if (flag == f.name)
                    spec = &f;
            if (!spec)
                return fail(err, std::string(command_name(out.cmd)) + ": unknown option '" + flag + "' (try dlock " +
                                     c + " --help)");
            if (std::string_view(spec->commands).find(command_letter(out.cmd)) == std::string_view::npos)
                return fail(err, std::string(command_name(out.cmd)) + ": option '" + flag + "' does not apply here");
            if (spec->takes_value && !inline_value) {
                if (i + 1 >= args.size())
                    return fail(err, "option '" + flag + "' needs a value");
                value = args[++i];
            } else if (!spec->takes_value && inline_value) {
                return fail(err, "option '" + flag + "' takes no value");
            }
            set[flag] = value;
            continue;
        }
        positional.push_back(a);
    }
    for (; i < args.size(); ++i)
        out.argv.push_back(args[i]);

    if (positional.empty())
        return fail(err, std::string(command_name(out.cmd)) + ": missing lock NAME");
    if (positional.size() > 1) {
        if (out.cmd == command::run || out.cmd == command::elect)
            return fail(err, std::string(command_name(out.cmd)) + ": unexpected '" + positional[1] +
                                 "' before '--' (usage: dlock " + command_name(out.cmd) + " NAME -- COMMAND...)");
        return fail(err, std::string(command_name(out.cmd)) + ": unexpected argument '" + positional[1] + "'");
    }
    out.name = positional[0];
    if (out.name.empty())
        return fail(err, "the lock NAME is empty");
    if (out.cmd == command::run && out.argv.empty())
        return fail(err, "run: missing COMMAND after '--' (usage: dlock run NAME -- COMMAND [ARGS...])");
    if (out.cmd == command::elect) {
        out.observe = set.count("--observe") != 0;
        out.rejoin = set.count("--rejoin") != 0;
        if (out.observe && out.rejoin)
            return fail(err, "elect --observe campaigns never: --rejoin is a candidate's");
        if (set.count("--value"))
            out.value = set["--value"];
        if (out.observe && !out.argv.empty())
            return fail(err, "elect --observe runs no COMMAND: it prints each change of leader");
        if (out.observe && out.value)
            return fail(err, "elect --observe proclaims nothing: --value is a candidate's");
        if (!out.observe && set.count("--json"))
            return fail(err, "elect: --json is for --observe's lines");
        if (!out.observe && out.argv.empty())
            return fail(err, "elect: missing COMMAND after '--' (usage: dlock elect NAME [--value V] -- COMMAND "
                             "[ARGS...], or dlock elect --observe NAME)");
    }
    if (out.cmd != command::run && out.cmd != command::elect && !out.argv.empty())
        return fail(err, std::string(command_name(out.cmd)) + ": unexpected '--'");

    // Pass 2: flags over the config file over the environment over defaults.
    std::string url_from = "the default URL";
    if (const char* env_url = getenv("DLOCK_URL"); env_url && *env_url) {
        out.url = env_url;
        url_from = "$DLOCK_URL";
    }
    std::string config_path = set.count("--config") ? set["--config"] : "";
    if (config_path.empty())
        if (const char* p = getenv("DLOCK_CONFIG"); p && *p)
            config_path = p;
    boost::json::object redis_obj;
    bool have_redis = false;
    if (!config_path.empty()) {
        std::string text;
        if (!read(config_path, text))
            return fail(err, "config file '" + config_path + "': cannot be read");
        std::string before = out.url;
        if (!apply_file(config_path, text, set, out, redis_obj, have_redis, err))
            return false;
        if (out.url != before)
            url_from = config_path + ": \"url\"";
    }
    if (set.count("--url"))
        out.url = set["--url"];
    if (set.count("--prefix"))
        out.prefix = set["--prefix"];
    if (set.count("--lease") && !bounded_duration("--lease", set["--lease"], out.lease, err))
        return false;
    if (set.count("--grace") && !bounded_duration("--grace", set["--grace"], out.grace, err))
        return false;
    if (set.count("--wait")) {
        std::chrono::milliseconds d{};
        if (!duration("--wait", set["--wait"], d, err))
            return false;
        out.wait = d;
    }
    // A wait too long for any deadline is no limit: "wait forever", never "held elsewhere".
    if (out.wait && *out.wait > lock::unlimited_after)
        out.wait.reset();
    if (set.count("--no-watchdog"))
        out.watchdog = false;
    if (set.count("--no-scripting"))
        out.scripting = false;
    out.shared = set.count("--shared") != 0;
    out.exclusive = set.count("--exclusive") != 0;
    if (out.shared && out.exclusive)
        return fail(err, "--shared and --exclusive exclude each other: a reader or the writer");
    if (set.count("--permits")) {
        const auto& v = set["--permits"];
        unsigned long n = 0;
        std::size_t used = 0;
        try {
            n = std::stoul(v, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != v.size() || v[0] == '-' || n == 0 || n > 1'000'000)
            return fail(err, "--permits: expected a number of permits from 1 to 1000000, got '" + v + "'");
        out.permits = static_cast<unsigned>(n);
    }
    if ((out.shared || out.exclusive) && out.permits > 0)
        return fail(err, std::string(out.shared ? "--shared" : "--exclusive") +
                             " and --permits exclude each other: a name is a read-write lock or a semaphore");
    if (set.count("--conflict-exit-code") &&
        !exit_code("--conflict-exit-code", set["--conflict-exit-code"], out.conflict_exit_code, err))
        return false;
    out.force = set.count("--force") != 0;
    out.json = set.count("--json") != 0;
    out.verbose = set.count("--verbose") != 0;

    if (out.lease.count() <= 0)
        return fail(err, "the lease must be longer than 0 (--lease or \"lease\" in the config file)");
    // One URL, or a list: Redlock over independent masters, or a cluster's seeds. A
    // Sentinel URL holds its own comma-separated list of sentinels.
    if (out.url.rfind("etcd://", 0) == 0) {
#ifndef DLOCK_HAS_ETCD
        return fail(err, "this dlock was built without etcd (DLOCK_WITH_ETCD=OFF): " +
                             std::string(set.count("--url") ? "--url" : url_from) + " is an etcd:// URL");
#else
        etcd::config_error eerr;
        if (!etcd::parse_url(out.url, out.etcd, eerr))
            return fail(err, std::string(set.count("--url") ? "--url" : url_from) + ": " + eerr.message);
        if (set.count("--cluster"))
            return fail(err, "--cluster is for Redis Cluster; an etcd:// URL lists the etcd members itself");
        if (out.lease.count() % 1000 != 0)
            return fail(err,
                        "--lease: etcd leases are whole seconds (got " + std::to_string(out.lease.count()) + " ms)");
        out.topology = topology::etcd;
        if (!out.scripting)
            return fail(err, "--no-scripting is for one Redis server (or Sentinel); etcd runs no scripts");
        if (out.cmd == command::release && !out.force)
            return fail(err, "release: refusing to free '" + out.name +
                                 "' whoever holds it without --force (the holder is not told; its lease is gone)");
        return true;
#endif
    }
    if (out.url.rfind("zk://", 0) == 0 || out.url.rfind("zookeeper://", 0) == 0) {
#ifndef DLOCK_HAS_ZOOKEEPER
        return fail(err, "this dlock was built without ZooKeeper (DLOCK_WITH_ZOOKEEPER=OFF): " +
                             std::string(set.count("--url") ? "--url" : url_from) + " is a zk:// URL");
#else
        zookeeper::config_error zerr;
        if (!zookeeper::parse_url(out.url, out.zookeeper, zerr))
            return fail(err, std::string(set.count("--url") ? "--url" : url_from) + ": " + zerr.message);
        if (set.count("--cluster"))
            return fail(err, "--cluster is for Redis Cluster; a zk:// URL lists the ensemble's servers itself");
        if (!out.scripting)
            return fail(err, "--no-scripting is for one Redis server (or Sentinel); ZooKeeper runs no scripts");
        out.topology = topology::zookeeper;
        if (out.cmd == command::release && !out.force)
            return fail(err, "release: refusing to free '" + out.name +
                                 "' whoever holds it without --force (the holder is not told; its node is gone)");
        return true;
#endif
    }
    if (out.url.rfind("postgresql://", 0) == 0 || out.url.rfind("postgres://", 0) == 0) {
#ifndef DLOCK_HAS_POSTGRES
        return fail(err, "this dlock was built without PostgreSQL (DLOCK_WITH_POSTGRES=OFF): " +
                             std::string(set.count("--url") ? "--url" : url_from) + " is a postgresql:// URL");
#else
        postgres::config_error perr;
        if (!postgres::parse_url(out.url, out.postgres, perr))
            return fail(err, std::string(set.count("--url") ? "--url" : url_from) + ": " + perr.message);
        if (set.count("--cluster"))
            return fail(err, "--cluster is for Redis Cluster; a postgresql:// URL names one server");
        if (!out.scripting)
            return fail(err, "--no-scripting is for one Redis server (or Sentinel); PostgreSQL runs no Lua");
        out.topology = topology::postgres;
        if (out.cmd == command::release && !out.force)
            return fail(err, "release: refusing to free '" + out.name +
                                 "' whoever holds it without --force (the holder is not told; its row is gone)");
        return true;
#endif
    }
    if (out.url.rfind("mariadb://", 0) == 0 || out.url.rfind("mysql://", 0) == 0) {
#ifndef DLOCK_HAS_MARIADB
        return fail(err, "this dlock was built without MariaDB (DLOCK_WITH_MARIADB=OFF): " +
                             std::string(set.count("--url") ? "--url" : url_from) + " is a mariadb:// URL");
#else
        mariadb::config_error merr;
        if (!mariadb::parse_url(out.url, out.mariadb, merr))
            return fail(err, std::string(set.count("--url") ? "--url" : url_from) + ": " + merr.message);
        if (set.count("--cluster"))
            return fail(err, "--cluster is for Redis Cluster; a mariadb:// URL names one server");
        if (!out.scripting)
            return fail(err, "--no-scripting is for one Redis server (or Sentinel); MariaDB runs no Lua");
        out.topology = topology::mariadb;
        if (out.cmd == command::release && !out.force)
            return fail(err, "release: refusing to free '" + out.name +
                                 "' whoever holds it without --force (the holder is not told; its row is gone)");
        return true;
#endif
    }
    if (out.url.rfind("memcached://", 0) == 0) {
#ifndef DLOCK_HAS_MEMCACHED
        return fail(err, "this dlock was built without memcached (DLOCK_WITH_MEMCACHED=OFF): " +
                             std::string(set.count("--url") ? "--url" : url_from) + " is a memcached:// URL");
#else
        memcached::config_error merr;
        if (!memcached::parse_url(out.url, out.memcached, merr))
            return fail(err, std::string(set.count("--url") ? "--url" : url_from) + ": " + merr.message);
        if (set.count("--cluster"))
            return fail(err, "--cluster is for Redis Cluster; a memcached:// URL lists its servers itself");
        if (!out.scripting)
            return fail(err, "--no-scripting is for one Redis server (or Sentinel); memcached runs no scripts");
        if (out.lease.count() % 1000 != 0 || out.lease.count() < 2000)
            return fail(err, "--lease: memcached leases are whole seconds, at least 2s (got " +
                                 std::to_string(out.lease.count()) + " ms)");
        out.topology = topology::memcached;
        if (out.cmd == command::release && !out.force)
            return fail(err, "release: refusing to free '" + out.name +
                                 "' whoever holds it without --force (the holder is not told; its lease is gone)");
        return true;
#endif
    }
    std::vector<std::string> urls;
    if (out.url.rfind("redis+sentinel://", 0) == 0) {
        urls.push_back(out.url);
    } else {
        for (std::size_t start = 0;;) {
            auto comma = out.url.find(',', start);
            urls.push_back(out.url.substr(start, comma - start));
            if (comma == std::string::npos)
                break;
            start = comma + 1;
        }
    }
    for (const auto& u : urls) {
        redis::config c;
        redis::config_error cerr;
        if (!redis::parse_url(u, c, cerr))  // the message names the URL, its password hidden
            return fail(err, std::string(set.count("--url") ? "--url" : url_from) + ": " + cerr.message);
        if (have_redis && !redis::parse_json(boost::json::value(redis_obj), c, cerr))
            return fail(err, config_path + ": \"redis\": " + cerr.message);
        c.client_name = "dlock-cli";
        out.servers.push_back(std::move(c));
    }
    // The same server twice would vote twice towards a Redlock quorum.
    std::vector<std::string> labels;
    for (const auto& u : urls)
        labels.push_back(redis::redact_url(u));
    if (redis::config_error cerr; !redis::check_distinct_nodes(out.servers, labels, cerr))
        return fail(err, std::string(set.count("--url") ? "--url" : url_from) + ": " + cerr.message);
    if (set.count("--cluster"))
        out.topology = topology::cluster;
    else if (out.topology != topology::cluster && out.servers.size() > 1)
        out.topology = topology::redlock;
    if (!out.scripting && out.topology != topology::single)
        return fail(err, "--no-scripting is for one Redis server (or Sentinel), not for a Redis Cluster or Redlock");
    if (out.cmd == command::release && !out.force)
        return fail(err, "release: refusing to free '" + out.name +
                             "' whoever holds it without --force (the holder is not told; its lease is gone)");
    return true;
}

std::string version_text()
{
    std::string text = std::string("dlock ") + DLOCK_VERSION_STRING;
    if (std::string_view(library_version().string) != DLOCK_VERSION_STRING)
        text += std::string(" (library ") + library_version().string + ")";
    text += "\nstores: redis";
#ifdef DLOCK_HAS_ETCD
    text += " etcd";
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
    text += " zookeeper";
#endif
#ifdef DLOCK_HAS_POSTGRES
    text += " postgres";
#endif
#ifdef DLOCK_HAS_MARIADB
    text += " mariadb";
#endif
#ifdef DLOCK_HAS_MEMCACHED
    text += " memcached";
#endif
    return text + "\n";
}

std::string usage(const std::string& topic)
{
    if (topic == "run")
        return R"(usage: dlock run [OPTIONS] NAME -- COMMAND [ARGS...]

Takes the lock NAME, runs COMMAND while a watchdog renews the lease, and releases the lock
when COMMAND exits. Exits with COMMAND's status (128+N if signal N ended it).
COMMAND's environment gets DLOCK_NAME, DLOCK_FENCING_TOKEN and DLOCK_LEASE_MS.

Options:
  --url URL[,URL...]        redis://[user:password@]host[:port][/db], rediss://..., unix:///path,
                            redis+sentinel://host:26379[,host...]/MASTER; several URLs: Redlock
                            over independent masters; etcd://host:2379[,host:port...][/prefix]:
                            an etcd cluster, in etcd's own lock layout (`dlock run --prefix ''
                            NAME` and `etcdctl lock NAME` exclude each other); leases in whole
                            seconds; memcached://host:11211[,host:port...]: an efficiency lock
                            (whole-second leases of 2s or more, no wake-ups: waiters sleep
                            until the holder's lease ends; a restart loses locks and resets
                            fencing tokens); zk://host:2181[,host:port...][/chroot][?root=/dlock]:
                            a ZooKeeper ensemble, in Curator's InterProcessMutex layout (lock
                            path <root>/<prefix><NAME>); postgresql://user:pw@host:5432/db
                            [?table=dlock_locks]: leases as rows of one table, fencing from a
                            sequence, waiters woken by NOTIFY; mariadb://user:pw@host:3306/db
                            [?table=dlock_locks] (or mysql://, a MariaDB 10.3+ server): the same
                            on MariaDB, waiters woken through the holder's GET_LOCK (default:
                            $DLOCK_URL, else redis://127.0.0.1:6379)
  --cluster                 the URLs are seeds of a Redis Cluster
  --no-scripting            Redis without Lua (WATCH/MULTI/EXEC), for servers that refuse EVAL;
                            one server or Sentinel; no direct hand-off (waiters are woken)
  --config FILE             JSON file with any of: url, cluster, redis, prefix, lease, wait,
                            watchdog, grace, conflict_exit_code, scripting (default:
                            $DLOCK_CONFIG); flags win
  --prefix P                key prefix, so applications sharing a server don't collide (dlock)
  --lease D                 lease, e.g. 500ms, 30s, 2m (30s). With the watchdog it is how long
                            a crashed dlock keeps the lock; without, how long the command may run
  --wait D                  how long to wait for the lock; 0 = one try (default: forever)
  --no-watchdog             fixed lease: the command is stopped when it ends
  --shared                  as a reader of the read-write lock NAME, with other readers
  --exclusive               as the writer of the read-write lock NAME
  --permits N               as the holder of one of the N permits of the semaphore NAME
                            (every user of NAME must give the same N)
  --grace D                 after a lost lease: SIGTERM, then SIGKILL after D (10s)
  --conflict-exit-code N    exit status when the lock is not had within --wait (75)
  -v, --verbose             say what happens on stderr

SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to COMMAND; the lock is released after it
exits. If dlock itself is killed, COMMAND gets SIGTERM and the lock frees itself after the lease.

Exit status: COMMAND's own, or 2 bad usage, 65 NAME is in use as another primitive
(a mutex, a read-write lock, a semaphore of another N: the message says which flags),
69 server unreachable or refused us, 75 lock busy (--conflict-exit-code), 76 lease lost
(COMMAND was terminated), 126 COMMAND not executable, 127 COMMAND not found.
)";
    if (topic == "elect")
        return R"(usage: dlock elect [OPTIONS] NAME [--value V] [--rejoin] -- COMMAND [ARGS...]
       dlock elect [OPTIONS] --observe [--json] NAME

Campaigns in the election NAME, runs COMMAND while leading with the value V proclaimed
(default: host:pid), and resigns when COMMAND exits; if leadership is lost, COMMAND is
stopped as `dlock run` stops it. With --rejoin, a lost leadership campaigns again and runs
COMMAND again once leading, as Curator's LeaderLatch re-joins; dlock exits when COMMAND
exits on its own (or on a signal). COMMAND's environment gets DLOCK_NAME, DLOCK_FENCING_TOKEN
(the term), DLOCK_LEADER_VALUE and DLOCK_LEASE_MS. On etcd, `dlock elect --prefix '' NAME`
and `etcdctl elect NAME` campaign against each other; on ZooKeeper, Curator's LeaderLatch.

With --observe: prints "leader TERM VALUE" or "no leader" at the start and at each change,
until SIGINT or SIGTERM (exit 0); --json prints one JSON object per change instead.

Options: --url, --cluster, --no-scripting, --config, --prefix, --lease, --no-watchdog,
--grace and -v as for `dlock run` (see dlock run --help). Stores with elections: Redis (one
server, Sentinel or Cluster, with scripting), ZooKeeper, etcd, PostgreSQL, MariaDB; Redlock,
memcached and Redis without scripting exit 69.

Exit status: COMMAND's own, or 2 bad usage, 65 NAME is in use as another primitive, 69
server unreachable or no elections there, 76 leadership lost (COMMAND was terminated), 126,
127 as for run.
)";
    if (topic == "status")
        return R"(usage: dlock status [--url URL] [--cluster] [--no-scripting] [--config FILE] [--prefix P] [--json] NAME

Shows whether NAME is held, the remaining lease, the holder's fencing token and the last
token issued. Exit status: 0, or 2 bad usage, 69 server unreachable.
)";
    if (topic == "release")
        return R"(usage: dlock release --force [--shared | --exclusive] [--url URL] [--cluster] [--no-scripting]
                     [--config FILE] [--prefix P] NAME

Operator's escape hatch: deletes NAME's lock whoever holds it and wakes its waiters. The
holder is not told until its next renewal (its `dlock run` then stops its command with
status 76). Refused without --force. On a read-write lock, --shared frees only its readers
and --exclusive only its writer (without either: both). Exit status: 0 (says whether it was
held), 2 bad usage, 65 NAME is not a read-write lock (--shared, --exclusive), 69 server
unreachable or without read-write locks.
)";
    return R"(usage: dlock COMMAND [OPTIONS] ...

Distributed locks on Redis, etcd, ZooKeeper, memcached, PostgreSQL or MariaDB, from the shell.

Commands:
  run NAME -- COMMAND...    run COMMAND while holding the lock NAME
  elect NAME -- COMMAND...  run COMMAND while leading the election NAME (--observe: watch it)
  status NAME               show who holds NAME (--json for machines)
  release NAME --force      free NAME whoever holds it

Run `dlock COMMAND --help` for a command's options, `dlock --version` for the version.
)";
}

}  // namespace dlock::cli
