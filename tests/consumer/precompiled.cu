// SPDX-License-Identifier: Apache-2.0
// A downstream program on flashmma::kernels: the default dispatch, forward(params), whose kernels
// come precompiled from the installed library. The consumer test compiles and links it (which
// fails if the library lacks an instance this file would need); it does not run it.
#include <flashmma/flashmma.cuh>

#include <cstdio>

int main() {
  flashmma::ForwardParams params;  // no tensors: forward() must refuse it, launching nothing
  const flashmma::Status status = flashmma::forward(params);
  std::printf("%s\n", status.message().c_str());
  return status.ok() ? 1 : 0;
}
