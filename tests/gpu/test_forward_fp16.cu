// SPDX-License-Identifier: Apache-2.0
// forward<Config> for every default fp16 config, over the case matrix and routed head dims.
#include "support/catch.hpp"

#include "support/forward_case.cuh"
#include "support/test_configs.hpp"

TEMPLATE_LIST_TEST_CASE("forward<Config> matches the reference for the default fp16 configs",
                        "[gpu][forward][fp16]", flashmma::test::DefaultFp16Configs) {
  flashmma::test::check_config_case_matrix<TestType>();
}
