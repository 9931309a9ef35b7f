// SPDX-License-Identifier: BSL-1.0
// Moved to <dlock/redis/cluster_store.hpp>; this header forwards to it for existing code.
#pragma once

#include <dlock/redis/cluster_store.hpp>
