// SPDX-License-Identifier: Apache-2.0
// A call that needs a family left out (FLASHMMA_DISABLE_DROPOUT) is refused with a message that
// names the option; a call that does not passes the same check. Header-only, the program asks
// kernel_families.hpp; on flashmma::kernels, the library itself, through precompiled.hpp, which
// refuses before it looks for a GPU. Exit code 0 when both hold.
#include <flashmma/kernel_families.hpp>
#include <flashmma/params.hpp>
#include <flashmma/status.hpp>
#ifdef CONSUMER_KERNELS
#include <flashmma/precompiled.hpp>
#endif

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

// A valid dense fp16 call at head dim 64; validation never reads the tensors.
flashmma::ForwardParams plain_call() {
  flashmma::ForwardParams p;
  p.dtype = flashmma::ScalarType::kFloat16;
  p.q = p.k = p.v = p.o = reinterpret_cast<void*>(std::uintptr_t{0x100000});
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = 128;
  p.heads_q = p.heads_kv = 2;
  p.head_dim = 64;
  p.q_strides = p.k_strides = p.v_strides = p.o_strides = flashmma::bshd_strides(128, 2, 64);
  return p;
}

flashmma::Status check(const flashmma::ForwardParams& p, bool launch) {
#ifdef CONSUMER_KERNELS
  if (launch) return flashmma::precompiled::forward(p);  // refused before the device
  return flashmma::precompiled::check_forward_families(p);
#else
  (void)launch;
  return flashmma::check_forward_families(p);
#endif
}

}  // namespace

int main() {
  flashmma::ForwardParams dropout = plain_call();
  dropout.dropout_p = 0.1f;
  const flashmma::Status refused = check(dropout, /*launch=*/true);
  std::printf("dropout: %s\n", refused.message().c_str());
  const bool named = refused.code() == flashmma::ErrorCode::kUnsupportedDevice &&
                     refused.message().find("-DFLASHMMA_DISABLE_DROPOUT=OFF") != std::string::npos;
  const flashmma::Status plain = check(plain_call(), /*launch=*/false);
  std::printf("plain: %s\n", plain.message().c_str());
  return named && plain.ok() ? 0 : 1;
}
