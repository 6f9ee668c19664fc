// SPDX-License-Identifier: Apache-2.0
// A downstream program on flashmma::kernels: the default dispatch, forward(params) and
// backward(params), whose kernels come precompiled from the installed library (the consumer
// test checks that its object holds none). The consumer test compiles and links it (which
// fails if the library lacks an instance this file would need); it does not run it.
#include <flashmma/backward.cuh>
#include <flashmma/flashmma.cuh>

#include <cstdio>

int main() {
  flashmma::ForwardParams params;  // no tensors: forward() must refuse it, launching nothing
  const flashmma::Status status = flashmma::forward(params);
  std::printf("%s\n", status.message().c_str());
  flashmma::BackwardParams gradients;  // likewise for backward()
  const flashmma::Status backward_status = flashmma::backward(gradients);
  std::printf("%s\n", backward_status.message().c_str());
  return status.ok() || backward_status.ok() ? 1 : 0;
}
