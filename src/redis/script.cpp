#include <dlock/redis/script.hpp>

#include <openssl/sha.h>

namespace dlock::redis {

script::script(std::string body) : body_(std::make_shared<const std::string>(std::move(body)))
{
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(body_->data()), body_->size(), digest);
    static constexpr char hex[] = "0123456789abcdef";
    sha1_.reserve(2 * SHA_DIGEST_LENGTH);
    for (unsigned char c : digest) {
        sha1_ += hex[c >> 4];
        sha1_ += hex[c & 15];
    }
}

}  // namespace dlock::redis
