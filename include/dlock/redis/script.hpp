// A Lua script sent as EVALSHA, with its SHA1 computed once.
#pragma once

#include <memory>
#include <string>

namespace dlock::redis {

/// A Lua script. The connection sends EVALSHA and falls back to EVAL on NOSCRIPT (after a
/// server restart or SCRIPT FLUSH), which also caches the script again.
class script {
public:
    /// Computes the body's SHA1 once; copies share the body.
    explicit script(std::string body);
    /// The Lua source.
    const std::string& body() const noexcept { return *body_; }
    /// Lowercase hex SHA1 of the body, as EVALSHA wants it.
    const std::string& sha1() const noexcept { return sha1_; }
    /// The body, shared: a pending EVAL fallback keeps it without copying it.
    const std::shared_ptr<const std::string>& shared_body() const noexcept { return body_; }

private:
    std::shared_ptr<const std::string> body_;
    std::string sha1_;
};

}  // namespace dlock::redis
