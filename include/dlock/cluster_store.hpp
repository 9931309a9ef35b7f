// SPDX-License-Identifier: BSL-1.0
/// @file
/// Deprecated since 0.1.0, removed in 1.0.0 (CHANGELOG.md): moved to <dlock/redis/cluster_store.hpp>; this header only
/// forwards to it for existing code.
#pragma once

#include <dlock/redis/cluster_store.hpp>
