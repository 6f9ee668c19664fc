// SPDX-License-Identifier: Apache-2.0
// The stride rules of validate_tensor.hpp, forward and backward: strides left unset, outputs
// whose rows would be written by more than one block, and the layouts that stay legal
// (broadcast inputs, padded and permuted outputs, negative strides). Each case starts from a
// valid call and breaks one thing; validation never dereferences the fake addresses.
#include "support/catch.hpp"
#include "support/fake_backward_call.hpp"

#include <flashmma/backward_params.hpp>
#include <flashmma/backward_validate.hpp>
#include <flashmma/params.hpp>
#include <flashmma/status.hpp>
#include <flashmma/validate.hpp>

#include <cstdint>
#include <string>

namespace {

using Catch::Contains;
using flashmma::BackwardParams;
using flashmma::ErrorCode;
using flashmma::ForwardParams;
using flashmma::Status;
using flashmma::TensorStrides;

using flashmma::test::fake_int32;
using flashmma::test::fake_pointer;

// A backward call (its forward fields are a forward call): GQA, every tensor dense BSHD.
BackwardParams valid_params() { return flashmma::test::fake_backward_call(); }

TensorStrides& forward_strides(ForwardParams& p, const std::string& tensor) {
  if (tensor == "q") return p.q_strides;
  if (tensor == "k") return p.k_strides;
  if (tensor == "v") return p.v_strides;
  return p.o_strides;
}

TensorStrides& backward_strides(BackwardParams& p, const std::string& tensor) {
  if (tensor == "do") return p.do_strides;
  if (tensor == "dq") return p.dq_strides;
  if (tensor == "dk") return p.dk_strides;
  if (tensor == "dv") return p.dv_strides;
  return forward_strides(p, tensor);
}

int64_t& stride(TensorStrides& strides, const std::string& field) {
  if (field == "batch") return strides.batch;
  if (field == "head") return strides.head;
  return strides.row;
}

void require_refused(const Status& s, const std::string& fragment) {
  INFO(s.message());
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains(fragment));
}

}  // namespace

TEST_CASE("The valid call of these cases passes", "[validate][strides]") {
  const BackwardParams p = valid_params();
  CHECK(flashmma::validate_params(p).ok());
  CHECK(flashmma::validate_backward_params(p).ok());
}

TEST_CASE("Strides left unset are refused by name, with the strides to set", "[validate][strides]") {
  const struct {
    const char* tensor;
    const char* hint;
  } forward_cases[] = {
      {"q", "q_strides = flashmma::bshd_strides(seqlen_q, heads_q, head_dim) for a contiguous "
            "[batch, seqlen_q, heads_q, head_dim] tensor"},
      {"k", "k_strides = flashmma::bshd_strides(seqlen_k, heads_kv, head_dim)"},
      {"v", "v_strides = flashmma::bshd_strides(seqlen_k, heads_kv, head_dim)"},
      {"o", "o_strides = flashmma::bshd_strides(seqlen_q, heads_q, head_dim)"}};
  for (const auto& c : forward_cases) {
    CAPTURE(c.tensor);
    BackwardParams p = valid_params();
    forward_strides(p, c.tensor) = TensorStrides{};
    const Status s = flashmma::validate_params(p);
    require_refused(s, std::string(c.tensor) + "_strides is unset");
    CHECK_THAT(s.message(), Contains(c.hint));
    // The backward checks the forward's fields with the same words.
    CHECK(flashmma::validate_backward_params(p).message() == s.message());
  }
  for (const char* tensor : {"do", "dq", "dk", "dv"}) {
    CAPTURE(tensor);
    BackwardParams p = valid_params();
    backward_strides(p, tensor) = TensorStrides{};
    require_refused(flashmma::validate_backward_params(p), std::string(tensor) +
                                                               "_strides is unset");
  }
  SECTION("unset counts only the dimensions longer than 1") {
    BackwardParams p = valid_params();
    p.batch = 1;
    p.q_strides.head = 0;
    p.q_strides.row = 0;
    p.q_strides.batch = 4096;  // never used with one batch entry
    require_refused(flashmma::validate_params(p), "q_strides is unset");
  }
  SECTION("a single row needs no strides at all") {
    BackwardParams p = valid_params();
    p.batch = 1;
    p.seqlen_q = 1;
    p.heads_q = 1;
    p.heads_kv = 1;
    p.q_strides = TensorStrides{};
    p.o_strides = TensorStrides{};
    CHECK(flashmma::validate_params(p).ok());
  }
}

TEST_CASE("An input may broadcast along some of its dimensions", "[validate][strides]") {
  // A zero stride reads one row or head for all of them, as PyTorch's expand() gives.
  for (const char* tensor : {"q", "k", "v"}) {
    for (const char* field : {"batch", "head", "row"}) {
      CAPTURE(tensor, field);
      BackwardParams p = valid_params();
      stride(forward_strides(p, tensor), field) = 0;
      CHECK(flashmma::validate_params(p).ok());
    }
  }
  BackwardParams p = valid_params();
  p.do_strides.batch = 0;
  CHECK(flashmma::validate_backward_params(p).ok());
}

TEST_CASE("An output needs a place of its own for every row", "[validate][strides]") {
  SECTION("a zero stride along a dimension longer than 1") {
    for (const char* field : {"batch", "head", "row"}) {
      CAPTURE(field);
      BackwardParams p = valid_params();
      stride(p.o_strides, field) = 0;
      const Status s = flashmma::validate_params(p);
      require_refused(s, std::string("o_strides.") + field + " is 0, but o is written");
      CHECK_THAT(s.message(), Contains("(a race)"));
      CHECK_THAT(s.message(), Contains("o_strides = flashmma::bshd_strides(seqlen_q, heads_q, "
                                       "head_dim)"));
    }
    for (const char* tensor : {"dq", "dk", "dv"}) {
      CAPTURE(tensor);
      BackwardParams p = valid_params();
      backward_strides(p, tensor).head = 0;
      require_refused(flashmma::validate_backward_params(p),
                      std::string(tensor) + "_strides.head is 0, but " + tensor + " is written");
    }
  }
  SECTION("rows that overlap") {
    BackwardParams p = valid_params();
    p.o_strides.row = p.head_dim;  // the next row starts where the next head does
    require_refused(flashmma::validate_params(p),
                    "o_strides.row = 64 is shorter than the 512 elements that the smaller "
                    "strides already span (head_dim, head), so o's rows overlap");
    p = valid_params();
    p.o_strides.head = 32;  // half a head: each head overlaps the next
    require_refused(flashmma::validate_params(p),
                    "o_strides.head = 32 is shorter than the 64 elements that the smaller "
                    "strides already span (head_dim)");
    p = valid_params();
    p.dk_strides.batch = p.dk_strides.row;  // batch entries land on each other's rows
    require_refused(flashmma::validate_backward_params(p), "dk's rows overlap");
  }
  SECTION("the overlap check sees strides by size, whatever their sign") {
    BackwardParams p = valid_params();
    p.o_strides.row = -p.o_strides.row;
    CHECK(flashmma::validate_params(p).ok());
    p.o_strides.head = -32;
    require_refused(flashmma::validate_params(p), "o_strides.head = -32 is shorter");
  }
}

TEST_CASE("Padded and permuted outputs pass", "[validate][strides]") {
  BackwardParams p = valid_params();
  SECTION("[batch, heads, seq, head_dim]") {
    p.o_strides = flashmma::bhsd_strides(p.seqlen_q, p.heads_q, p.head_dim);
    p.dk_strides = flashmma::bhsd_strides(p.seqlen_k, p.heads_kv, p.head_dim);
  }
  SECTION("rows padded past the head dim") {
    p.o_strides = flashmma::bshd_strides(p.seqlen_q, p.heads_q, p.head_dim + 8);
  }
  SECTION("[seq, batch, heads, head_dim]") {
    p.o_strides = TensorStrides{p.heads_q * p.head_dim, p.head_dim,
                                p.batch * p.heads_q * p.head_dim};
  }
  SECTION("huge strides do not overflow the check") {
    p.o_strides.batch = int64_t{1} << 62;
  }
  CHECK(flashmma::validate_params(p).ok());
  CHECK(flashmma::validate_backward_params(p).ok());
}

TEST_CASE("Packed and paged tensors get hints in their own layout", "[validate][strides]") {
  SECTION("packed queries") {
    BackwardParams p = valid_params();
    p.cu_seqlens_q = fake_int32(0x110000);
    p.total_q = 150;
    p.q_strides = TensorStrides{};
    p.o_strides = TensorStrides{0, p.head_dim, p.heads_q * p.head_dim};
    require_refused(flashmma::validate_params(p),
                    "q_strides = {0, head_dim, heads_q * head_dim} for a contiguous [total_q, "
                    "heads_q, head_dim] tensor");
    p.q_strides = p.o_strides;
    p.o_strides.row = 0;
    require_refused(flashmma::validate_params(p), "its 150 rows would all land");
  }
  SECTION("a paged KV append writes the pools") {
    ForwardParams p = valid_params();
    p.block_table = fake_int32(0x120000);
    p.page_size = 16;
    p.num_pages = 64;
    p.block_table_batch_stride = 9;
    p.k_strides = p.v_strides = flashmma::bshd_strides(p.page_size, p.heads_kv, p.head_dim);
    p.k_new = fake_pointer(0x130000);
    p.v_new = fake_pointer(0x140000);
    p.seqlen_new = 1;
    p.cache_seqlens = fake_int32(0x150000);
    p.k_new_strides = p.v_new_strides = flashmma::bshd_strides(1, p.heads_kv, p.head_dim);
    REQUIRE(flashmma::validate_params(p).ok());
    p.v_strides.head = 0;  // fine to read, not to write
    require_refused(flashmma::validate_params(p), "v_strides.head is 0, but v is written");
    p.v_strides = TensorStrides{};
    require_refused(flashmma::validate_params(p),
                    "v_strides = flashmma::bshd_strides(page_size, heads_kv, head_dim) for a "
                    "contiguous [num_pages, page_size, heads_kv, head_dim] tensor");
    p.v_strides = p.k_strides;
    p.k_new_strides = TensorStrides{};
    require_refused(flashmma::validate_params(p),
                    "k_new_strides = flashmma::bshd_strides(seqlen_new, heads_kv, head_dim)");
  }
}
