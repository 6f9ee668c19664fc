// SPDX-License-Identifier: Apache-2.0
// forward<Config> for every default bf16 config, over the case matrix and routed head dims.
#include "support/catch.hpp"

#include "support/forward_case.cuh"
#include "support/test_configs.hpp"

TEMPLATE_LIST_TEST_CASE("forward<Config> matches the reference for the default bf16 configs",
                        "[gpu][forward][bf16]", flashmma::test::DefaultBf16Configs) {
  flashmma::test::check_config_case_matrix<TestType>();
}
