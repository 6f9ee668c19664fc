// SPDX-License-Identifier: Apache-2.0
// Reproducible standard-normal test data for the host references' tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace flashmma {
namespace test {

inline std::vector<double> normal_values(int64_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (double& x : values) x = normal(generator);
  return values;
}

}  // namespace test
}  // namespace flashmma
