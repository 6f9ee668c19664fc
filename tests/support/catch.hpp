// SPDX-License-Identifier: Apache-2.0
// Catch2, v3 or v2: the tests include this rather than a Catch2 header. tests/CMakeLists.txt
// finds one version and defines FLASHMMA_CATCH2_MAJOR; on v3 the v2 names the tests use are
// mapped onto v3's, so that one source builds on both.
#pragma once

#if FLASHMMA_CATCH2_MAJOR >= 3

#include <catch2/catch_all.hpp>

#include <string>

namespace Catch {

// v3 moved the string matchers into Catch::Matchers and renamed Contains to ContainsSubstring.
inline Matchers::StringContainsMatcher Contains(const std::string& text) {
  return Matchers::ContainsSubstring(text);
}
using Matchers::EndsWith;
using Matchers::StartsWith;

}  // namespace Catch

// v2 declares Approx at global scope, v3 only in Catch.
using Catch::Approx;

#else

#include <catch2/catch.hpp>

#endif
