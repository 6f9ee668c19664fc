// SPDX-License-Identifier: Apache-2.0
// Every error of validate_params, validate_for_kernel and validate_for_device: each case starts
// from a valid call, breaks one thing, and checks the code and that the message names it.
// Validation never dereferences the pointers, so fake addresses stand in for device memory.
#include "support/catch.hpp"

#include <flashmma/params.hpp>
#include <flashmma/status.hpp>
#include <flashmma/traits/default_configs.hpp>
#include <flashmma/traits/sm90_default_configs.hpp>
#include <flashmma/validate.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace {

using Catch::Contains;
using flashmma::ErrorCode;
using flashmma::ForwardParams;
using flashmma::MaskKind;
using flashmma::ScalarType;
using flashmma::Status;

const void* fake_pointer(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }

constexpr std::uintptr_t kQAddress = 0x10000;
constexpr std::uintptr_t kKAddress = 0x20000;
constexpr std::uintptr_t kVAddress = 0x30000;
constexpr std::uintptr_t kOAddress = 0x40000;
constexpr std::uintptr_t kLseAddress = 0x50000;

// The strides of valid_params' layouts for p's sizes, after a case changes them.
void set_strides(ForwardParams& p) {
  p.q_strides = flashmma::bshd_strides(p.seqlen_q, p.heads_q, p.head_dim);
  p.k_strides = flashmma::bhsd_strides(p.seqlen_k, p.heads_kv, p.head_dim);
  p.v_strides = flashmma::bhsd_strides(p.seqlen_k, p.heads_kv, p.head_dim);
  p.o_strides = flashmma::bshd_strides(p.seqlen_q, p.heads_q, p.head_dim);
}

// Grouped-query attention, q and o in [batch, seq, head, dim], k and v in [batch, head, seq, dim].
ForwardParams valid_params() {
  ForwardParams p;
  p.dtype = ScalarType::kFloat16;
  p.q = fake_pointer(kQAddress);
  p.k = fake_pointer(kKAddress);
  p.v = fake_pointer(kVAddress);
  p.o = const_cast<void*>(fake_pointer(kOAddress));
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 130;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 64;
  set_strides(p);
  return p;
}

const flashmma::KernelRequirements kFp16HeadDim64 =
    flashmma::kernel_requirements<flashmma::DefaultConfigT<__half, 64>>();

// An H100/H200: compute capability 9.0, 227 KiB of shared memory per block.
const flashmma::DeviceInfo kHopper{90, 227 * 1024, 50 * 1024 * 1024};

// The field of TensorStrides named `field`, for looping over all of them.
int64_t& stride(flashmma::TensorStrides& strides, const std::string& field) {
  if (field == "batch") return strides.batch;
  if (field == "head") return strides.head;
  return strides.row;
}

flashmma::TensorStrides& strides_of(ForwardParams& p, char tensor) {
  switch (tensor) {
    case 'q': return p.q_strides;
    case 'k': return p.k_strides;
    case 'v': return p.v_strides;
    default: return p.o_strides;
  }
}

void set_pointer(ForwardParams& p, char tensor, std::uintptr_t address) {
  switch (tensor) {
    case 'q': p.q = fake_pointer(address); break;
    case 'k': p.k = fake_pointer(address); break;
    case 'v': p.v = fake_pointer(address); break;
    default: p.o = const_cast<void*>(fake_pointer(address)); break;
  }
}

std::uintptr_t address_of(char tensor) {
  switch (tensor) {
    case 'q': return kQAddress;
    case 'k': return kKAddress;
    case 'v': return kVAddress;
    default: return kOAddress;
  }
}

}  // namespace

TEST_CASE("Valid params pass every check", "[validate]") {
  const ForwardParams p = valid_params();
  const Status params = flashmma::validate_params(p);
  CHECK(params.ok());
  CHECK(params.code() == ErrorCode::kOk);
  CHECK(params.message() == "ok");
  CHECK(flashmma::validate_for_kernel(p, kFp16HeadDim64).ok());
  CHECK(flashmma::validate_for_device(kHopper, kFp16HeadDim64).ok());
  CHECK(flashmma::validate(p, kFp16HeadDim64, kHopper).ok());
}

TEST_CASE("Valid variations pass", "[validate]") {
  ForwardParams p = valid_params();
  SECTION("bf16") {
    p.dtype = ScalarType::kBFloat16;
    auto req = kFp16HeadDim64;
    req.dtype = ScalarType::kBFloat16;
    CHECK(flashmma::validate(p, req, kHopper).ok());
  }
  SECTION("causal mask") {
    p.mask = MaskKind::kCausal;
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("explicit softmax scale") {
    p.softmax_scale = 0.125f;
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("head_dim smaller than the config's, still a multiple of 8") {
    p.head_dim = 40;
    CHECK(flashmma::validate(p, kFp16HeadDim64, kHopper).ok());
  }
  SECTION("head_dim 8 and 256, the ends of the range") {
    p.head_dim = 8;
    CHECK(flashmma::validate_params(p).ok());
    p.head_dim = 256;
    set_strides(p);
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("multi-query attention") {
    p.heads_kv = 1;
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("an aligned lse") {
    p.lse = reinterpret_cast<float*>(std::uintptr_t{kLseAddress + 4});
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("negative strides that are multiples of 8") {
    p.q_strides.row = -p.q_strides.row;
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("the largest grid") {
    p.batch = flashmma::kMaxGridZ;
    p.heads_q = flashmma::kMaxGridY;
    p.heads_kv = 1;
    set_strides(p);
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("a compute capability 8.0 device with 163 KiB") {
    CHECK(flashmma::validate_for_device({80, 163 * 1024}, kFp16HeadDim64).ok());
  }
}

TEST_CASE("Size-1 dimensions may have any stride", "[validate]") {
  ForwardParams p = valid_params();
  SECTION("batch of 1") {
    p.batch = 1;
    p.q_strides.batch = 3;
    p.k_strides.batch = 5;
    p.v_strides.batch = 7;
    p.o_strides.batch = 1;
  }
  SECTION("one key/value head") {
    p.heads_kv = 1;
    p.k_strides.head = 1;
    p.v_strides.head = 9;
  }
  SECTION("one query head") {
    p.heads_q = 1;
    p.heads_kv = 1;
    p.q_strides.head = 3;
    p.o_strides.head = 5;
    p.k_strides.head = 7;
    p.v_strides.head = 11;
  }
  SECTION("one query, one key") {
    p.seqlen_q = 1;
    p.seqlen_k = 1;
    p.q_strides.row = 1;
    p.o_strides.row = 3;
    p.k_strides.row = 5;
    p.v_strides.row = 7;
  }
  CHECK(flashmma::validate_params(p).ok());
}

TEST_CASE("Null tensors are rejected by name", "[validate]") {
  for (const char* tensor : {"q", "k", "v", "o"}) {
    CAPTURE(tensor);
    ForwardParams p = valid_params();
    set_pointer(p, tensor[0], 0);
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains(std::string(tensor) + " is null"));
    CHECK_THAT(s.message(), Contains("tensor"));
  }
}

TEST_CASE("Non-positive sizes are rejected by name", "[validate]") {
  int64_t ForwardParams::*const fields[] = {&ForwardParams::batch,    &ForwardParams::seqlen_q,
                                            &ForwardParams::seqlen_k, &ForwardParams::heads_q,
                                            &ForwardParams::heads_kv, &ForwardParams::head_dim};
  const char* names[] = {"batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv", "head_dim"};
  for (int i = 0; i < 6; ++i) {
    for (int64_t value : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
      CAPTURE(names[i], value);
      ForwardParams p = valid_params();
      p.*fields[i] = value;
      const Status s = flashmma::validate_params(p);
      CHECK(s.code() == ErrorCode::kInvalidArgument);
      CHECK_THAT(s.message(),
                 Contains(std::string(names[i]) + " must be >= 1 (got " + std::to_string(value)));
    }
  }
}

TEST_CASE("head_dim must be a multiple of 8 up to 256", "[validate]") {
  for (int64_t head_dim : {4, 12, 63, 257, 264, 512}) {
    CAPTURE(head_dim);
    ForwardParams p = valid_params();
    p.head_dim = head_dim;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("head_dim must be a multiple of 8 between 8 and 256"));
    CHECK_THAT(s.message(), Contains("got " + std::to_string(head_dim)));
  }
}

TEST_CASE("heads_q must be a multiple of heads_kv", "[validate]") {
  ForwardParams p = valid_params();
  p.heads_kv = 3;
  const Status s = flashmma::validate_params(p);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains("heads_q (8) must be a multiple of heads_kv (3)"));
}

TEST_CASE("Grid and sequence limits", "[validate]") {
  ForwardParams p = valid_params();
  SECTION("heads_q fills gridDim.y") {
    p.heads_q = flashmma::kMaxGridY + 1;
    p.heads_kv = 1;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("heads_q must be at most 65535 (got 65536)"));
  }
  SECTION("batch fills gridDim.z") {
    p.batch = flashmma::kMaxGridZ + 1;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("batch must be at most 65535 (got 65536)"));
  }
  SECTION("sequence positions fit in 32 bits with room to spare") {
    p.seqlen_q = flashmma::kMaxSeqlen;
    p.seqlen_k = flashmma::kMaxSeqlen;
    set_strides(p);
    CHECK(flashmma::validate_params(p).ok());
    for (const bool query_side : {true, false}) {
      CAPTURE(query_side);
      ForwardParams q = p;
      (query_side ? q.seqlen_q : q.seqlen_k) = flashmma::kMaxSeqlen + 1;
      const Status s = flashmma::validate_params(q);
      CHECK(s.code() == ErrorCode::kInvalidArgument);
      CHECK_THAT(s.message(), Contains("seqlen_q and seqlen_k must be at most 2^30 = 1073741824"));
    }
  }
}

TEST_CASE("Tensors must be 16-byte aligned", "[validate]") {
  for (char tensor : {'q', 'k', 'v', 'o'}) {
    for (std::uintptr_t misalignment : {2, 8, 14}) {
      CAPTURE(tensor, misalignment);
      ForwardParams p = valid_params();
      set_pointer(p, tensor, address_of(tensor) + misalignment);
      const Status s = flashmma::validate_params(p);
      CHECK(s.code() == ErrorCode::kInvalidArgument);
      CHECK_THAT(s.message(), Contains(std::string(1, tensor) + " must be 16-byte aligned"));
    }
  }
}

TEST_CASE("Strides must be multiples of 8 elements", "[validate]") {
  for (char tensor : {'q', 'k', 'v', 'o'}) {
    for (const char* field : {"batch", "head", "row"}) {
      CAPTURE(tensor, field);
      ForwardParams p = valid_params();
      stride(strides_of(p, tensor), field) += 4;
      const Status s = flashmma::validate_params(p);
      CHECK(s.code() == ErrorCode::kInvalidArgument);
      CHECK_THAT(s.message(), Contains(std::string(1, tensor) + "_strides." + field +
                                       " must be a multiple of 8 elements"));
    }
  }
}

TEST_CASE("lse must be 4-byte aligned", "[validate]") {
  ForwardParams p = valid_params();
  p.lse = reinterpret_cast<float*>(std::uintptr_t{kLseAddress + 2});
  const Status s = flashmma::validate_params(p);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains("lse must be 4-byte aligned"));
}

TEST_CASE("softmax_scale must be positive and finite, or NaN", "[validate]") {
  for (float scale : {0.0f, -0.0f, -0.125f, std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
    CAPTURE(scale);
    ForwardParams p = valid_params();
    p.softmax_scale = scale;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("softmax_scale must be a positive finite number"));
  }
}

TEST_CASE("Unknown enum values are rejected", "[validate]") {
  ForwardParams p = valid_params();
  SECTION("mask") {
    p.mask = static_cast<MaskKind>(7);
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("mask must be MaskKind::kNone or MaskKind::kCausal"));
  }
  SECTION("dtype") {
    p.dtype = static_cast<ScalarType>(5);
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("dtype must be ScalarType::kFloat16 or"));
  }
}

TEST_CASE("The config must match the call", "[validate]") {
  ForwardParams p = valid_params();
  SECTION("dtype") {
    p.dtype = ScalarType::kBFloat16;
    const Status s = flashmma::validate_for_kernel(p, kFp16HeadDim64);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("dtype is bf16 but the config was built for fp16"));
  }
  SECTION("head_dim") {
    p.head_dim = 72;
    const Status s = flashmma::validate_for_kernel(p, kFp16HeadDim64);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("head_dim 72 exceeds the config's HeadDim 64"));
  }
}

TEST_CASE("The device must be able to run the config", "[validate]") {
  SECTION("compute capability below 8.0") {
    const Status s = flashmma::validate_for_device({75, 64 * 1024}, kFp16HeadDim64);
    CHECK(s.code() == ErrorCode::kUnsupportedDevice);
    CHECK_THAT(s.message(), Contains("compute capability 7.5"));
    CHECK_THAT(s.message(), Contains("needs 8.0 or newer"));
  }
  SECTION("too little shared memory") {
    using Config = flashmma::TileConfig<__half, 128, 128, 64, 8, 2,
                                        flashmma::SmemLayout::kXorSwizzle>;  // 96 KiB
    const auto req = flashmma::kernel_requirements<Config>();
    CHECK(flashmma::validate_for_device({86, 96 * 1024}, req).ok());
    const Status s = flashmma::validate_for_device({86, 96 * 1024 - 1}, req);
    CHECK(s.code() == ErrorCode::kUnsupportedDevice);
    CHECK_THAT(s.message(), Contains("needs 98304 bytes of shared memory"));
    CHECK_THAT(s.message(), Contains("device allows 98303"));
  }
}

TEST_CASE("validate() reports the first failing check", "[validate]") {
  ForwardParams p = valid_params();
  p.q = nullptr;
  p.head_dim = 128;  // also too large for the config
  const Status params_first = flashmma::validate(p, kFp16HeadDim64, {75, 0});
  CHECK_THAT(params_first.message(), Contains("q is null"));

  p.q = fake_pointer(kQAddress);
  p.q_strides = flashmma::bshd_strides(p.seqlen_q, p.heads_q, p.head_dim);
  p.o_strides = p.q_strides;
  p.k_strides = flashmma::bhsd_strides(p.seqlen_k, p.heads_kv, p.head_dim);
  p.v_strides = p.k_strides;
  const Status kernel_next = flashmma::validate(p, kFp16HeadDim64, {75, 0});
  CHECK(kernel_next.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(kernel_next.message(), Contains("exceeds the config's HeadDim"));

  p.head_dim = 64;
  const Status device_last = flashmma::validate(p, kFp16HeadDim64, {75, 0});
  CHECK(device_last.code() == ErrorCode::kUnsupportedDevice);
}

TEST_CASE("Every message starts with the library's name", "[validate]") {
  ForwardParams p = valid_params();
  p.batch = 0;
  CHECK_THAT(flashmma::validate_params(p).message(), Catch::StartsWith("flashmma: "));
  CHECK_THAT(flashmma::validate_for_device({70, 0}, kFp16HeadDim64).message(),
             Catch::StartsWith("flashmma: "));
}

// --- the variant fields (window, softcap, ALiBi) --------------------------------------------------

constexpr std::uintptr_t kSlopesAddress = 0x60000;

const float* fake_slopes(std::uintptr_t address) { return reinterpret_cast<const float*>(address); }

TEST_CASE("Valid variant fields pass", "[validate][variant]") {
  ForwardParams p = valid_params();
  SECTION("windows") {
    for (const auto& window : {std::pair<int64_t, int64_t>{-1, -1}, {0, 0}, {-1, 0}, {16, 3},
                               {100000, -1}}) {
      p.window_left = window.first;
      p.window_right = window.second;
      CHECK(flashmma::validate_params(p).ok());
    }
  }
  SECTION("causal with a left window, right -1 or 0") {
    p.mask = MaskKind::kCausal;
    p.window_left = 64;
    for (int64_t right : {-1, 0}) {
      p.window_right = right;
      CHECK(flashmma::validate_params(p).ok());
    }
  }
  SECTION("softcap and ALiBi, per head and per batch entry") {
    p.softcap = 30.f;
    p.alibi_slopes = fake_slopes(kSlopesAddress);
    CHECK(flashmma::validate_params(p).ok());
    p.alibi_batch_stride = p.heads_q;
    CHECK(flashmma::validate_params(p).ok());
  }
}

TEST_CASE("Windows below -1 are rejected by side", "[validate][variant]") {
  ForwardParams p = valid_params();
  SECTION("left") {
    p.window_left = -2;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("window_left must be -1 (unbounded)") && Contains("-2"));
  }
  SECTION("right") {
    p.window_right = -5;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("window_right must be -1 (unbounded)") && Contains("-5"));
  }
}

TEST_CASE("The causal mask takes no right window", "[validate][variant]") {
  ForwardParams p = valid_params();
  p.mask = MaskKind::kCausal;
  p.window_right = 8;
  const Status s = flashmma::validate_params(p);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains("window_right must be -1 or 0 when mask is MaskKind::kCausal"));
}

TEST_CASE("softcap must be 0 or positive and finite", "[validate][variant]") {
  for (float cap : {-1.f, -0.5f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(cap);
    ForwardParams p = valid_params();
    p.softcap = cap;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("softcap must be 0 (off) or a positive finite number"));
  }
}

TEST_CASE("ALiBi slopes: alignment and batch stride", "[validate][variant]") {
  ForwardParams p = valid_params();
  SECTION("misaligned slopes") {
    p.alibi_slopes = fake_slopes(kSlopesAddress + 2);
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("alibi_slopes must be 4-byte aligned"));
  }
  SECTION("a batch stride shorter than a row of heads") {
    p.alibi_slopes = fake_slopes(kSlopesAddress);
    p.alibi_batch_stride = p.heads_q - 1;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("alibi_batch_stride must be 0") && Contains("heads_q = 8"));
  }
  SECTION("a batch stride without slopes") {
    p.alibi_batch_stride = p.heads_q;
    const Status s = flashmma::validate_params(p);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains("alibi_batch_stride is set but alibi_slopes is null"));
  }
}

TEST_CASE("A caller's own policy refuses the built-in variant fields", "[validate][variant]") {
  ForwardParams p = valid_params();
  CHECK(flashmma::detail::validate_no_builtin_variant(p).ok());
  SECTION("mask") {
    p.mask = MaskKind::kCausal;
    CHECK_THAT(flashmma::detail::validate_no_builtin_variant(p).message(),
               Contains("mask must be MaskKind::kNone when a score policy is given"));
  }
  SECTION("window") {
    p.window_left = 4;
    CHECK_THAT(flashmma::detail::validate_no_builtin_variant(p).message(),
               Contains("window_left and window_right must be -1"));
  }
  SECTION("softcap") {
    p.softcap = 2.f;
    CHECK_THAT(flashmma::detail::validate_no_builtin_variant(p).message(),
               Contains("softcap must be 0 when a score policy is given"));
  }
  SECTION("ALiBi") {
    p.alibi_slopes = fake_slopes(kSlopesAddress);
    CHECK_THAT(flashmma::detail::validate_no_builtin_variant(p).message(),
               Contains("alibi_slopes must be null when a score policy is given"));
  }
}

namespace {

constexpr std::uintptr_t kCuSeqlensQAddress = 0x70000;
constexpr std::uintptr_t kCuSeqlensKAddress = 0x71000;
constexpr std::uintptr_t kSequsedKAddress = 0x72000;

const int32_t* fake_int32(std::uintptr_t address) {
  return reinterpret_cast<const int32_t*>(address);
}

// valid_params() as a packed batch: Q and O [total_q, heads_q, d], K and V [total_k, heads_kv, d].
ForwardParams valid_packed_params() {
  ForwardParams p = valid_params();
  p.cu_seqlens_q = fake_int32(kCuSeqlensQAddress);
  p.cu_seqlens_k = fake_int32(kCuSeqlensKAddress);
  p.total_q = 150;
  p.q_strides = {0, p.head_dim, p.heads_q * p.head_dim};
  p.o_strides = p.q_strides;
  p.k_strides = {0, p.head_dim, p.heads_kv * p.head_dim};
  p.v_strides = p.k_strides;
  return p;
}

}  // namespace

TEST_CASE("Variable-length batches are described completely", "[validate][varlen]") {
  ForwardParams p = valid_packed_params();
  REQUIRE(flashmma::validate_params(p).ok());
  CHECK(flashmma::lse_rows(p) == p.heads_q * p.total_q);
  CHECK(flashmma::lse_head_stride(p) == p.total_q);
  CHECK(flashmma::lse_batch_stride(p) == 0);
  SECTION("seqused_k alone, over dense tensors") {
    ForwardParams dense = valid_params();
    dense.seqused_k = fake_int32(kSequsedKAddress);
    CHECK(flashmma::validate_params(dense).ok());
    CHECK(flashmma::lse_rows(dense) == dense.lse_elements());
  }
  SECTION("total_q") {
    p.total_q = 0;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("total_q must be the rows of packed Q, between 1 and 2^31 - 1"));
    p.total_q = int64_t{1} << 31;
    CHECK_THAT(flashmma::validate_params(p).message(), Contains("got 2147483648"));
  }
  SECTION("total_q without cu_seqlens_q") {
    p.cu_seqlens_q = nullptr;
    p.q_strides = flashmma::bshd_strides(p.seqlen_q, p.heads_q, p.head_dim);
    p.o_strides = p.q_strides;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("total_q is set but cu_seqlens_q is null"));
  }
  SECTION("total_k: optional, the rows of packed K and V") {
    p.total_k = 300;
    CHECK(flashmma::validate_params(p).ok());
    p.total_k = -1;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("total_k must be the rows of packed K and V, between 1 and 2^31 - 1 "
                        "(cu_seqlens_k is int32), or 0 when not known; got -1"));
    p.total_k = int64_t{1} << 31;
    CHECK_THAT(flashmma::validate_params(p).message(), Contains("got 2147483648"));
    p.total_k = 300;
    p.cu_seqlens_k = nullptr;
    p.k_strides = flashmma::bshd_strides(p.seqlen_k, p.heads_kv, p.head_dim);
    p.v_strides = p.k_strides;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("total_k is set but cu_seqlens_k is null"));
  }
  SECTION("packed tensors have no batch stride") {
    for (const char tensor : {'q', 'k', 'v', 'o'}) {
      ForwardParams broken = p;
      strides_of(broken, tensor).batch = 4096;
      const std::string message = flashmma::validate_params(broken).message();
      CHECK_THAT(message, Contains(std::string(1, tensor) + "_strides.batch must be 0 with " +
                                   (tensor == 'q' || tensor == 'o' ? "cu_seqlens_q"
                                                                   : "cu_seqlens_k")));
    }
    p.batch = 1;  // one sequence: the batch stride is never used
    p.q_strides.batch = 4096;
    CHECK(flashmma::validate_params(p).ok());
  }
  SECTION("alignment of the arrays") {
    p.seqused_k = fake_int32(kSequsedKAddress + 2);
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("seqused_k must be 4-byte aligned (an int32 [batch] device array)"));
    p.seqused_k = nullptr;
    p.cu_seqlens_q = fake_int32(kCuSeqlensQAddress + 1);
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("cu_seqlens_q must be 4-byte aligned (an int32 [batch + 1] device array)"));
  }
  SECTION("the Hopper kernel takes dense batches only") {
    using Hopper = flashmma::Sm90DefaultConfig<__half, 64>::type;
    const flashmma::KernelRequirements hopper = flashmma::kernel_requirements<Hopper>();
    CHECK_FALSE(hopper.variable_lengths);
    CHECK(kFp16HeadDim64.variable_lengths);
    CHECK(flashmma::validate_for_kernel(p, kFp16HeadDim64).ok());
    CHECK_THAT(flashmma::validate_for_kernel(p, hopper).message(),
               Contains("cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_index and k_new (a KV "
                        "append) are not available on the sm_90a kernel yet"));
    ForwardParams dense = valid_params();
    CHECK(flashmma::validate_for_kernel(dense, hopper).ok());
    dense.seqused_k = fake_int32(kSequsedKAddress);
    CHECK_FALSE(flashmma::validate_for_kernel(dense, hopper).ok());
  }
}

TEST_CASE("A paged KV cache is described completely", "[validate][paged]") {
  ForwardParams p = valid_params();
  p.block_table = fake_int32(0x74000);
  p.page_size = 16;
  p.num_pages = 100;
  p.block_table_batch_stride = 9;  // ceil(130 / 16)
  p.k_strides = p.v_strides = flashmma::bshd_strides(16, p.heads_kv, p.head_dim);
  REQUIRE(flashmma::validate_params(p).ok());
  SECTION("the table's rows hold the pages of seqlen_k keys") {
    p.block_table_batch_stride = 8;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("block_table_batch_stride must be at least ceil(seqlen_k / page_size) = 9"));
  }
  SECTION("page_size and num_pages") {
    ForwardParams q = p;
    q.page_size = 0;
    CHECK_THAT(flashmma::validate_params(q).message(),
               Contains("page_size must be the keys per page, between 1 and 2^30"));
    q = p;
    q.num_pages = int64_t{1} << 31;
    CHECK_THAT(flashmma::validate_params(q).message(),
               Contains("num_pages must be the pages in the K and V pools"));
  }
  SECTION("no packed keys") {
    p.cu_seqlens_k = fake_int32(kCuSeqlensKAddress);
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("cu_seqlens_k must be null with block_table"));
  }
  SECTION("page fields without a table") {
    p.block_table = nullptr;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("page_size, num_pages or block_table_batch_stride is set but block_table "
                        "is null"));
  }
  SECTION("alignment") {
    p.block_table = fake_int32(0x74002);
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("block_table must be 4-byte aligned"));
  }
  SECTION("the Hopper kernel refuses it") {
    using Hopper = flashmma::Sm90DefaultConfig<__half, 64>::type;
    CHECK_THAT(flashmma::validate_for_kernel(p, flashmma::kernel_requirements<Hopper>()).message(),
               Contains("block_table (a paged KV cache) is not available on the sm_90a kernel"));
    CHECK(flashmma::validate_for_kernel(p, kFp16HeadDim64).ok());
  }
}

TEST_CASE("A KV append is described completely", "[validate][kvcache]") {
  ForwardParams p = valid_params();  // K and V: the cache, 130 rows per entry
  p.k_new = fake_pointer(0x80000);
  p.v_new = fake_pointer(0x90000);
  p.seqlen_new = 3;
  p.k_new_strides = p.v_new_strides = flashmma::bshd_strides(3, p.heads_kv, p.head_dim);
  p.cache_seqlens = fake_int32(0x75000);
  REQUIRE(flashmma::validate_params(p).ok());
  SECTION("rotary tables") {
    p.rotary_cos = fake_pointer(0xA0000);
    p.rotary_sin = fake_pointer(0xB0000);
    p.rotary_dim = 64;
    p.rotary_positions = 130;
    CHECK(flashmma::validate_params(p).ok());
    p.rotary_dim = 66;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("rotary_dim must be even, between 2 and head_dim = 64; got 66"));
    p.rotary_dim = 32;
    p.rotary_sin = nullptr;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("rotary_cos and rotary_sin go together"));
    p.rotary_sin = fake_pointer(0xB0000);
    p.rotary_positions = 0;
    CHECK_THAT(flashmma::validate_params(p).message(), Contains("rotary_positions must be"));
  }
  SECTION("the append's own fields") {
    ForwardParams q = p;
    q.v_new = nullptr;
    CHECK_THAT(flashmma::validate_params(q).message(), Contains("v_new is null"));
    q = p;
    q.seqlen_new = 131;
    CHECK_THAT(flashmma::validate_params(q).message(),
               Contains("seqlen_new must be between 1 and seqlen_k = 130"));
    q = p;
    q.cache_seqlens = nullptr;
    CHECK_THAT(flashmma::validate_params(q).message(), Contains("cache_seqlens must be"));
    q = p;
    q.seqused_k = fake_int32(0x76000);
    CHECK_THAT(flashmma::validate_params(q).message(), Contains("seqused_k must be null with k_new"));
    q = p;
    q.k_new_strides.row = 4;
    CHECK_THAT(flashmma::validate_params(q).message(),
               Contains("k_new_strides.row must be a multiple of 8 elements"));
  }
  SECTION("append fields without k_new") {
    p.k_new = nullptr;
    CHECK_THAT(flashmma::validate_params(p).message(),
               Contains("v_new, seqlen_new, cache_seqlens or a rotary field is set but k_new is "
                        "null"));
  }
  SECTION("kv_batch_index picks contiguous entries only") {
    ForwardParams q = valid_params();
    q.kv_batch_index = fake_int32(0x77000);
    CHECK_THAT(flashmma::validate_params(q).message(),
               Contains("kv_batch_entries must be the batch entries of K and V"));
    q.kv_batch_entries = 4;
    CHECK(flashmma::validate_params(q).ok());
    CHECK_FALSE(flashmma::validate_for_kernel(
                    q, flashmma::kernel_requirements<flashmma::Sm90DefaultConfig<__half, 64>::type>())
                    .ok());
    q.block_table = fake_int32(0x74000);
    q.page_size = 16;
    q.num_pages = 100;
    q.block_table_batch_stride = 9;
    CHECK_THAT(flashmma::validate_params(q).message(),
               Contains("kv_batch_index must be null with block_table or cu_seqlens_k"));
  }
}
