// SPDX-License-Identifier: Apache-2.0
// docs/api.md's table "What a field left unset does", tested: every field the table marks
// "refused" is left at its default in an otherwise valid call of the kind that needs it, and
// validation must refuse the call with a message that names the field. (The fields the table
// marks with a default behaviour are exercised by the kernels' own tests.)
#include "support/catch.hpp"
#include "support/fake_backward_call.hpp"

#include <flashmma/backward_params.hpp>
#include <flashmma/backward_validate.hpp>
#include <flashmma/params.hpp>
#include <flashmma/status.hpp>
#include <flashmma/validate.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace {

using Catch::Contains;
using flashmma::BackwardParams;
using flashmma::ErrorCode;
using flashmma::Status;

using flashmma::test::fake_int32;
using flashmma::test::fake_pointer;

// The calls the table speaks of, each valid as built.
enum class CallKind { kDense, kPacked, kPaged, kBatchIndex, kAppend, kRotary, kAlibi };

BackwardParams valid_call(CallKind kind) {
  BackwardParams p = flashmma::test::fake_backward_call();
  switch (kind) {
    case CallKind::kDense: break;
    case CallKind::kPacked:
      p.cu_seqlens_q = fake_int32(0x110000);
      p.total_q = 150;
      p.q_strides = p.o_strides = {0, p.head_dim, p.heads_q * p.head_dim};
      break;
    case CallKind::kPaged:
      p.block_table = fake_int32(0x120000);
      p.page_size = 16;
      p.num_pages = 64;
      p.block_table_batch_stride = 9;  // ceil(130 / 16)
      p.k_strides = p.v_strides = flashmma::bshd_strides(p.page_size, p.heads_kv, p.head_dim);
      break;
    case CallKind::kBatchIndex:
      p.kv_batch_index = fake_int32(0x130000);
      p.kv_batch_entries = 4;
      break;
    case CallKind::kAppend:
    case CallKind::kRotary:
      p.k_new = fake_pointer(0x140000);
      p.v_new = fake_pointer(0x150000);
      p.seqlen_new = 3;
      p.k_new_strides = p.v_new_strides = flashmma::bshd_strides(3, p.heads_kv, p.head_dim);
      p.cache_seqlens = fake_int32(0x160000);
      if (kind == CallKind::kRotary) {
        p.rotary_cos = fake_pointer(0x170000);
        p.rotary_sin = fake_pointer(0x180000);
        p.rotary_dim = 64;
        p.rotary_positions = 130;
      }
      break;
    case CallKind::kAlibi:
      p.alibi_slopes = static_cast<const float*>(fake_pointer(0x190000));
      p.alibi_batch_stride = p.heads_q;
      break;
  }
  return p;
}

struct ForgottenField {
  const char* field;
  CallKind kind;
  bool backward;  // checked by validate_backward_params (else by validate_params)
  std::function<void(BackwardParams&, const BackwardParams&)> forget;  // (call, defaults)
  const char* message;  // what the refusal must say
};

#define FLASHMMA_FORGET(field) [](BackwardParams& p, const BackwardParams& d) { p.field = d.field; }

const std::vector<ForgottenField>& forgotten_fields() {
  static const std::vector<ForgottenField> fields = {
      {"batch", CallKind::kDense, false, FLASHMMA_FORGET(batch), "batch must be >= 1"},
      {"seqlen_q", CallKind::kDense, false, FLASHMMA_FORGET(seqlen_q), "seqlen_q must be >= 1"},
      {"seqlen_k", CallKind::kDense, false, FLASHMMA_FORGET(seqlen_k), "seqlen_k must be >= 1"},
      {"heads_q", CallKind::kDense, false, FLASHMMA_FORGET(heads_q), "heads_q must be >= 1"},
      {"heads_kv", CallKind::kDense, false, FLASHMMA_FORGET(heads_kv), "heads_kv must be >= 1"},
      {"head_dim", CallKind::kDense, false, FLASHMMA_FORGET(head_dim), "head_dim must be >= 1"},
      {"q", CallKind::kDense, false, FLASHMMA_FORGET(q), "q is null"},
      {"k", CallKind::kDense, false, FLASHMMA_FORGET(k), "k is null"},
      {"v", CallKind::kDense, false, FLASHMMA_FORGET(v), "v is null"},
      {"o", CallKind::kDense, false, FLASHMMA_FORGET(o), "o is null"},
      {"q_strides", CallKind::kDense, false, FLASHMMA_FORGET(q_strides), "q_strides is unset"},
      {"k_strides", CallKind::kDense, false, FLASHMMA_FORGET(k_strides), "k_strides is unset"},
      {"v_strides", CallKind::kDense, false, FLASHMMA_FORGET(v_strides), "v_strides is unset"},
      {"o_strides", CallKind::kDense, false, FLASHMMA_FORGET(o_strides), "o_strides is unset"},
      {"total_q", CallKind::kPacked, false, FLASHMMA_FORGET(total_q),
       "total_q must be the rows of packed Q"},
      {"page_size", CallKind::kPaged, false, FLASHMMA_FORGET(page_size),
       "page_size must be the keys per page"},
      {"num_pages", CallKind::kPaged, false, FLASHMMA_FORGET(num_pages),
       "num_pages must be the pages in the K and V pools"},
      {"block_table_batch_stride", CallKind::kPaged, false,
       FLASHMMA_FORGET(block_table_batch_stride), "block_table_batch_stride must be at least"},
      {"kv_batch_entries", CallKind::kBatchIndex, false, FLASHMMA_FORGET(kv_batch_entries),
       "kv_batch_entries must be the batch entries of K and V"},
      {"v_new", CallKind::kAppend, false, FLASHMMA_FORGET(v_new), "v_new is null"},
      {"seqlen_new", CallKind::kAppend, false, FLASHMMA_FORGET(seqlen_new),
       "seqlen_new must be between 1 and seqlen_k"},
      {"cache_seqlens", CallKind::kAppend, false, FLASHMMA_FORGET(cache_seqlens),
       "cache_seqlens must be a 4-byte aligned int32 [batch] device array"},
      {"k_new_strides", CallKind::kAppend, false, FLASHMMA_FORGET(k_new_strides),
       "k_new_strides is unset"},
      {"v_new_strides", CallKind::kAppend, false, FLASHMMA_FORGET(v_new_strides),
       "v_new_strides is unset"},
      {"rotary_sin", CallKind::kRotary, false, FLASHMMA_FORGET(rotary_sin),
       "rotary_cos and rotary_sin go together"},
      {"rotary_dim", CallKind::kRotary, false, FLASHMMA_FORGET(rotary_dim),
       "rotary_dim must be even"},
      {"rotary_positions", CallKind::kRotary, false, FLASHMMA_FORGET(rotary_positions),
       "rotary_positions must be the rows of rotary_cos and rotary_sin"},
      {"alibi_slopes", CallKind::kAlibi, false, FLASHMMA_FORGET(alibi_slopes),
       "alibi_batch_stride is set but alibi_slopes is null"},
      {"lse", CallKind::kDense, true, FLASHMMA_FORGET(lse), "lse is null"},
      {"d_o", CallKind::kDense, true, FLASHMMA_FORGET(d_o), "d_o is null"},
      {"dq", CallKind::kDense, true, FLASHMMA_FORGET(dq), "dq is null"},
      {"dk", CallKind::kDense, true, FLASHMMA_FORGET(dk), "dk is null"},
      {"dv", CallKind::kDense, true, FLASHMMA_FORGET(dv), "dv is null"},
      {"do_strides", CallKind::kDense, true, FLASHMMA_FORGET(do_strides), "do_strides is unset"},
      {"dq_strides", CallKind::kDense, true, FLASHMMA_FORGET(dq_strides), "dq_strides is unset"},
      {"dk_strides", CallKind::kDense, true, FLASHMMA_FORGET(dk_strides), "dk_strides is unset"},
      {"dv_strides", CallKind::kDense, true, FLASHMMA_FORGET(dv_strides), "dv_strides is unset"},
      {"workspace", CallKind::kDense, true, FLASHMMA_FORGET(workspace),
       "workspace: the backward pass needs"},
      {"workspace_bytes", CallKind::kDense, true, FLASHMMA_FORGET(workspace_bytes),
       "workspace: the backward pass needs"},
  };
  return fields;
}

#undef FLASHMMA_FORGET

Status validate_as(const BackwardParams& p, bool backward) {
  return backward ? flashmma::validate_backward_params(p) : flashmma::validate_params(p);
}

}  // namespace

TEST_CASE("Each call the audit starts from is valid", "[validate][audit]") {
  for (CallKind kind : {CallKind::kDense, CallKind::kPacked, CallKind::kPaged,
                        CallKind::kBatchIndex, CallKind::kAppend, CallKind::kRotary,
                        CallKind::kAlibi}) {
    CAPTURE(static_cast<int>(kind));
    const Status s = flashmma::validate_params(valid_call(kind));
    INFO(s.message());
    CHECK(s.ok());
  }
  CHECK(flashmma::validate_backward_params(valid_call(CallKind::kDense)).ok());
}

TEST_CASE("A field the call needs, left at its default, is refused by name", "[validate][audit]") {
  const BackwardParams defaults;
  for (const ForgottenField& f : forgotten_fields()) {
    CAPTURE(f.field);
    BackwardParams p = valid_call(f.kind);
    f.forget(p, defaults);
    const Status s = validate_as(p, f.backward);
    INFO(s.message());
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(s.message(), Contains(f.message));
    CHECK_THAT(s.message(), Contains(f.field));
  }
}
