// SPDX-License-Identifier: BSL-1.0
/// @file
/// The core API and the Redis backend, as before the split into per-backend targets.
/// New backends are not added here: include <dlock/core.hpp> plus the backend you use
/// (<dlock/redis.hpp>, ...) to compile and link only that.
#pragma once

#include <dlock/core.hpp>
#include <dlock/redis.hpp>
