// SPDX-License-Identifier: Apache-2.0
// The default dispatch's families (kernel_families.hpp): built twice, as every build holds them
// and (FLASHMMA_TEST_LEFT_OUT) with the families left out that tests/CMakeLists.txt defines. A call
// that needs a family left out gets kUnsupportedDevice with a message that names the option to
// turn it back on; the others pass. The checks never read the tensors: fake addresses will do.
#include "support/catch.hpp"

#include <flashmma/backward_params.hpp>
#include <flashmma/kernel_families.hpp>
#include <flashmma/params.hpp>
#include <flashmma/status.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using Catch::Contains;
using flashmma::ErrorCode;
using flashmma::ForwardParams;
using flashmma::ScalarType;
using flashmma::Status;

void* fake_pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// A dense fp16 call at head dim 64 without a mask: every build holds its kernels.
ForwardParams plain_call() {
  ForwardParams p;
  p.dtype = ScalarType::kFloat16;
  p.q = p.k = p.v = p.o = fake_pointer(0x10000);
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = 128;
  p.heads_q = p.heads_kv = 4;
  p.head_dim = 64;
  return p;
}

struct FamilyCase {
  const char* name;
  ForwardParams params;
  const char* macro;   // in the message when the family is left out
  const char* option;  // likewise
};

std::vector<FamilyCase> family_cases() {
  std::vector<FamilyCase> cases;
  ForwardParams p = plain_call();
  p.dropout_p = 0.1f;
  cases.push_back({"dropout", p, "FLASHMMA_DISABLE_DROPOUT", "-DFLASHMMA_DISABLE_DROPOUT=OFF"});
  p = plain_call();
  p.seqused_k = static_cast<const int32_t*>(fake_pointer(0x20000));
  cases.push_back({"variable lengths", p, "FLASHMMA_DISABLE_VARLEN", "-DFLASHMMA_DISABLE_VARLEN=OFF"});
  p = plain_call();
  p.block_table = static_cast<const int32_t*>(fake_pointer(0x30000));
  cases.push_back({"paged", p, "FLASHMMA_DISABLE_PAGEDKV", "-DFLASHMMA_DISABLE_PAGEDKV=OFF"});
  p = plain_call();
  p.window_left = 16;
  cases.push_back({"window", p, "FLASHMMA_DISABLE_SLIDING_WINDOW",
                   "-DFLASHMMA_DISABLE_SLIDING_WINDOW=OFF"});
  p = plain_call();
  p.softcap = 30.f;
  cases.push_back({"softcap", p, "FLASHMMA_DISABLE_SOFTCAP", "-DFLASHMMA_DISABLE_SOFTCAP=OFF"});
  p = plain_call();
  p.alibi_slopes = static_cast<const float*>(fake_pointer(0x40000));
  cases.push_back({"alibi", p, "FLASHMMA_DISABLE_ALIBI", "-DFLASHMMA_DISABLE_ALIBI=OFF"});
  p = plain_call();
  p.dtype = ScalarType::kBFloat16;
  cases.push_back({"bf16", p, "FLASHMMA_DISABLE_BF16", "-DFLASHMMA_KERNEL_DTYPES=\"...;bf16\""});
  p = plain_call();
  p.head_dim = 80;  // runs on head dim 96's kernels
  cases.push_back({"head dim 96", p, "FLASHMMA_DISABLE_HEAD_DIM_96",
                   "-DFLASHMMA_KERNEL_HEAD_DIMS=\"...;96\""});
  return cases;
}

}  // namespace

TEST_CASE("a call of the default dispatch and the families it needs", "[kernel_families]") {
  CHECK(flashmma::check_forward_families(plain_call()).ok());
  ForwardParams causal = plain_call();
  causal.mask = flashmma::MaskKind::kCausal;
  CHECK(flashmma::check_forward_families(causal).ok());
  for (const FamilyCase& c : family_cases()) {
    INFO(c.name);
    const Status status = flashmma::check_forward_families(c.params);
#ifdef FLASHMMA_TEST_LEFT_OUT
    CHECK(status.code() == ErrorCode::kUnsupportedDevice);
    CHECK_THAT(status.message(), Contains(c.macro) && Contains(c.option));
#else
    CHECK(status.ok());
#endif
  }
}

TEST_CASE("the backward's families: its own head dims, and the backward itself",
          "[kernel_families]") {
  flashmma::BackwardParams p;
  static_cast<ForwardParams&>(p) = plain_call();
  p.head_dim = 32;  // the backward runs it on head dim 64's kernels
  const Status status = flashmma::check_backward_families(p);
#ifdef FLASHMMA_TEST_LEFT_OUT
  CHECK(status.code() == ErrorCode::kUnsupportedDevice);
  CHECK_THAT(status.message(), Contains("backward(params)") &&
                                   Contains("-DFLASHMMA_DISABLE_BACKWARD=OFF"));
#else
  CHECK(status.ok());
  p.head_dim = 100;  // head dim 128's
  CHECK(flashmma::check_backward_families(p).ok());
#endif
}

TEST_CASE("the message of a family left out says what to configure", "[kernel_families]") {
  ForwardParams p = plain_call();
  p.dropout_p = 0.5f;
  const Status status = flashmma::check_forward_families(p);
#ifdef FLASHMMA_TEST_LEFT_OUT
  CHECK(status.message() ==
        "flashmma: dropout_p > 0 needs the dropout kernels, left out of this build by "
        "FLASHMMA_DISABLE_DROPOUT; configure flashmma with -DFLASHMMA_DISABLE_DROPOUT=OFF");
#else
  CHECK(status.message() == "ok");
#endif
}
