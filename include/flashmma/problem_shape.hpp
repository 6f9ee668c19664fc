// SPDX-License-Identifier: Apache-2.0
// The shape of one attention problem: batch, lengths, heads and head dim. ForwardParams is one,
// and so are the tests' cases and references and the examples' settings: the six sizes are
// declared here and nowhere else. Plain C++.
#pragma once

#include <cstdint>

namespace flashmma {

struct ProblemShape {
  int64_t batch = 0;
  int64_t seqlen_q = 0;  // query positions of each sequence
  int64_t seqlen_k = 0;  // key (and value) positions of each sequence
  int64_t heads_q = 0;
  int64_t heads_kv = 0;  // divides heads_q: 1 is multi-query, heads_q is multi-head
  int64_t head_dim = 0;  // of Q, K, V and O alike

  // Query heads that share one K/V head.
  constexpr int64_t group_size() const { return heads_q / heads_kv; }
  // Elements of the dense tensors Q (and O), K (and V): rows of head_dim.
  constexpr int64_t q_elements() const { return batch * seqlen_q * heads_q * head_dim; }
  constexpr int64_t kv_elements() const { return batch * seqlen_k * heads_kv * head_dim; }
  // Rows of the LSE, [batch, heads_q, seqlen_q].
  constexpr int64_t lse_elements() const { return batch * heads_q * seqlen_q; }
  // The key on query 0's diagonal under bottom-right alignment.
  constexpr int64_t diagonal() const { return seqlen_k - seqlen_q; }
};

constexpr ProblemShape make_problem_shape(int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                                          int64_t heads_q, int64_t heads_kv, int64_t head_dim) {
  ProblemShape shape;
  shape.batch = batch;
  shape.seqlen_q = seqlen_q;
  shape.seqlen_k = seqlen_k;
  shape.heads_q = heads_q;
  shape.heads_kv = heads_kv;
  shape.head_dim = head_dim;
  return shape;
}

}  // namespace flashmma
