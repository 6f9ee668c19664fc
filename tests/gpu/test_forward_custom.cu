// SPDX-License-Identifier: Apache-2.0
// forward<Config> for the custom tile shapes of test_configs.hpp, over the case matrix and
// routed head dims.
#include "support/catch.hpp"

#include "support/forward_case.cuh"
#include "support/test_configs.hpp"

TEMPLATE_LIST_TEST_CASE("forward<Config> matches the reference for custom tile configs",
                        "[gpu][forward][custom]", flashmma::test::CustomConfigs) {
  flashmma::test::check_config_case_matrix<TestType>();
}
