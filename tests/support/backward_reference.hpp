// SPDX-License-Identifier: Apache-2.0
// The host reference of attention's backward pass, in double, for any score policy: what the
// backward kernels will be checked against. It recomputes the forward (O and the natural-log
// LSE) and returns dQ, dK and dV for an upstream gradient dO:
//
//   s_ij = scale q_i . k_j          l_ij = transform(s_ij), -inf where hidden
//   P_ij = exp(l_ij - LSE_i)        O_i = sum_j P_ij v_j
//   dV_j = sum_i P_ij dO_i          dP_ij = dO_i . v_j         D_i = dO_i . O_i
//   dl_ij = P_ij (dP_ij - D_i)      ds_ij = dl_ij * transform_gradient(s_ij, l_ij)
//   dQ_i = scale sum_j ds_ij k_j    dK_j = scale sum_i ds_ij q_i
//
// with a K/V head's dK and dV summed over the query heads of its group, and a row that sees no
// key contributing nothing (O = 0, LSE = -inf). Tensors are dense doubles, [batch, seq, heads,
// head_dim] (BSHD) with the head dim contiguous; the transform runs in float, as in the kernels.
//
// Dropout (FlashAttention-2's semantics, attention/philox.hpp's mask): a kept pair's probability
// is scaled by z = dropout_scale() (1 / the keep rate drawn), a dropped one's is 0, in O and in
// dV; dP_ij is z dO_i . v_j where kept and 0 where dropped; the LSE and D_i = dO_i . O_i are unchanged in form.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashmma/attention/philox.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/problem_shape.hpp"
#include "support/policy_row.hpp"

namespace flashmma {
namespace test {

// Dropout of probability p (0: none) with the mask of (seed, offset).
struct ReferenceDropout {
  float p = 0.f;
  uint64_t seed = 0;
  uint32_t offset = 0;
  // The mask's batch index of the shape's first batch entry (a packed sequence run alone keeps
  // its index in the pack).
  int64_t first_batch = 0;
};

struct BackwardReference {
  std::vector<double> o;    // [batch, seqlen_q, heads_q, head_dim]
  std::vector<double> lse;  // [batch, heads_q, seqlen_q]
  std::vector<double> dq;   // as q
  std::vector<double> dk;   // as k: [batch, seqlen_k, heads_kv, head_dim]
  std::vector<double> dv;   // as v
};

// Index of (b, s, h, 0) in a dense BSHD tensor.
inline int64_t bshd_index(int64_t b, int64_t s, int64_t h, int64_t seqlen, int64_t heads,
                          int64_t head_dim) {
  return ((b * seqlen + s) * heads + h) * head_dim;
}

template <class Policy>
BackwardReference backward_reference(const ProblemShape& shape, double scale,
                                     const Policy& policy, const std::vector<double>& q,
                                     const std::vector<double>& k, const std::vector<double>& v,
                                     const std::vector<double>& d_o,
                                     const ReferenceDropout& dropout = {}) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int64_t d = shape.head_dim, sq = shape.seqlen_q, sk = shape.seqlen_k;
  const int64_t hq = shape.heads_q, hkv = shape.heads_kv;
  const SequenceLengths lengths = sequence_lengths(sq, sk);
  BackwardReference r;
  r.o.assign(q.size(), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(shape.batch * hq * sq), -kInf);

  std::vector<double> scores(static_cast<std::size_t>(sk)), logits(scores.size()),
      probabilities(scores.size()), factors(scores.size());
  const uint32_t threshold = dropout_threshold(dropout.p);
  const double kept_scale = dropout_scale(threshold);  // 1 / (1 - p) to 2^-17
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kvh = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        const double* q_row = &q[bshd_index(b, i, h, sq, hq, d)];
        const double row_max = policy_row_logits(
            policy, b, h, i, lengths, scale,
            [&](int64_t j) {
              const double* k_row = &k[bshd_index(b, j, kvh, sk, hkv, d)];
              double dot = 0;
              for (int64_t x = 0; x < d; ++x) dot += q_row[x] * k_row[x];
              return dot;
            },
            scores.data(), logits.data());
        if (row_max == -kInf) continue;  // sees no key: O = 0, LSE = -inf, no gradient

        const double lse = row_log_sum_exp(logits.data(), sk, row_max);
        r.lse[(b * hq + h) * sq + i] = lse;
        double* o_row = &r.o[bshd_index(b, i, h, sq, hq, d)];
        for (int64_t j = 0; j < sk; ++j) {
          probabilities[j] = std::exp(logits[j] - lse);
          // The dropout factor of the pair: z where kept, 0 where dropped, 1 without dropout.
          factors[j] = 1.0;
          if (dropout.p > 0.f) {
            const bool keep = dropout_keep(dropout.seed, dropout.offset, dropout.first_batch + b,
                                           hq, h, static_cast<int32_t>(i),
                                           static_cast<int32_t>(j), threshold);
            factors[j] = keep ? kept_scale : 0.0;
          }
          const double* v_row = &v[bshd_index(b, j, kvh, sk, hkv, d)];
          for (int64_t x = 0; x < d; ++x) o_row[x] += factors[j] * probabilities[j] * v_row[x];
        }

        const double* do_row = &d_o[bshd_index(b, i, h, sq, hq, d)];
        double delta = 0;  // D_i = dO_i . O_i
        for (int64_t x = 0; x < d; ++x) delta += do_row[x] * o_row[x];
        double* dq_row = &r.dq[bshd_index(b, i, h, sq, hq, d)];
        for (int64_t j = 0; j < sk; ++j) {
          if (probabilities[j] == 0.0) continue;  // hidden (or underflowed: no contribution)
          const int64_t kv_offset = bshd_index(b, j, kvh, sk, hkv, d);
          const double* v_row = &v[kv_offset];
          const double* k_row = &k[kv_offset];
          double dp = 0;
          for (int64_t x = 0; x < d; ++x) {
            r.dv[kv_offset + x] += factors[j] * probabilities[j] * do_row[x];
            dp += do_row[x] * v_row[x];
          }
          dp *= factors[j];  // dP_ij = z_ij dO_i . v_j
          double ds = probabilities[j] * (dp - delta);
          if constexpr (Policy::kTransformsScores) {
            ds *= policy.transform_gradient(static_cast<float>(scores[j]),
                                            static_cast<float>(logits[j]),
                                            score_coord(b, h, i, j), lengths);
          }
          for (int64_t x = 0; x < d; ++x) {
            dq_row[x] += scale * ds * k_row[x];
            r.dk[kv_offset + x] += scale * ds * q_row[x];
          }
        }
      }
    }
  }
  return r;
}

}  // namespace test
}  // namespace flashmma
