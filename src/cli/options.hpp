// SPDX-License-Identifier: BSL-1.0
// Command-line and JSON-file options of the dlock tool, parsed without any I/O but reading
// the config file, so every rule is unit-tested.
#pragma once

#include <dlock/etcd/config.hpp>
#include <dlock/mariadb/config.hpp>
#include <dlock/memcached/config.hpp>
#include <dlock/postgres/config.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/zookeeper/config.hpp>

#include "cli/exit_status.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

enum class command {
    none,
    run,
    status,
    release,
    elect,  ///< campaign and run a command while leading, or --observe
    help,
    version  ///< --version: print the tool's and the library's version
};

/// Which store: one Redis (direct or through Sentinel), Redlock over several independent
/// masters (a URL list), or a Redis Cluster (--cluster; the URLs are seeds).
enum class topology {
    single,
    redlock,
    cluster,
    etcd,       ///< an etcd:// URL: etcd_store over the listed members
    memcached,  ///< a memcached:// URL: memcached_store over the listed servers
    zookeeper,  ///< a zk:// URL: zookeeper_store over the listed ensemble
    postgres,   ///< a postgresql:// URL: postgres_store on one server
    mariadb,    ///< a mariadb:// or mysql:// URL: mariadb_store on one server
};

/// The longest --lease or --grace. Redis refuses expiry times that overflow its 64-bit
/// millisecond clock; 2^46 ms (about 2,230 years) stays far from that and from any timer's.
inline constexpr std::chrono::milliseconds max_duration{std::int64_t(1) << 46};

struct options {
    command cmd = command::none;
    std::string name;                            ///< lock name (run, status, release)
    std::vector<std::string> argv;               ///< run: the command and its arguments
    std::string url = "redis://127.0.0.1:6379";  ///< one URL, or a comma-separated list
    std::vector<redis::config> servers;          ///< parsed from url (+ "redis" in the config file)
    etcd::config etcd;                           ///< topology::etcd: parsed from url
    memcached::config memcached;                 ///< topology::memcached: parsed from url
    zookeeper::config zookeeper;                 ///< topology::zookeeper: parsed from url
    postgres::config postgres;                   ///< topology::postgres: parsed from url
    mariadb::config mariadb;                     ///< topology::mariadb: parsed from url
    dlock::cli::topology topology = topology::single;
    std::string prefix = "dlock";
    std::chrono::milliseconds lease{30'000};
    /// none: forever (also for a wait longer than lock::unlimited_after, or too large to
    /// count in milliseconds); 0: one try
    std::optional<std::chrono::milliseconds> wait;
    bool watchdog = true;
    /// false (--no-scripting): Redis without Lua, WATCH/MULTI/EXEC (one server or Sentinel only)
    bool scripting = true;
    std::chrono::milliseconds grace{10'000};  ///< SIGTERM → SIGKILL after a lost lease
    int conflict_exit_code = exit_status::conflict;
    bool shared = false;     ///< run: a reader of the read-write lock NAME (--shared); release: its readers
    bool exclusive = false;  ///< run: the writer of the read-write lock NAME (--exclusive); release: its writer
    unsigned permits = 0;    ///< run: one of N permits of the semaphore NAME (--permits N); 0: a mutex
    std::optional<std::string> value;  ///< elect: the value proclaimed (--value; default "host:pid")
    bool observe = false;              ///< elect: print each change of leader (--observe)
    bool rejoin = false;               ///< elect: campaign again after a lost leadership (--rejoin)
    bool force = false;                ///< release
    bool json = false;                 ///< status
    bool verbose = false;
    std::string help_topic;  ///< help: "", "run", "elect", "status" or "release"
};

struct parse_error {
    std::string message;  ///< one line, names the flag or field and the bad value
};

/// Reads a file's whole text; false if it cannot.
using file_reader = std::function<bool(const std::string& path, std::string& text)>;

/// Parses `dlock COMMAND ...` (args without the program name). Precedence: flags, then the
/// --config file (or $DLOCK_CONFIG), then $DLOCK_URL, then defaults. `getenv` and `read`
/// are parameters so tests control the environment and files.
bool parse(const std::vector<std::string>& args, options& out, parse_error& err,
           const std::function<const char*(const char*)>& getenv, const file_reader& read);

/// `dlock --version`'s text: the tool's version (the project's), the library's it runs on,
/// and the stores it was built with.
std::string version_text();

/// The usage text for `topic` ("" for the overview).
std::string usage(const std::string& topic);

}  // namespace dlock::cli
