// SPDX-License-Identifier: Apache-2.0
// The host reference of decoding against a KV cache, with FlashAttention's
// flash_attn_with_kvcache semantics, in double: what the inference kernels (split-KV, paged
// caches, KV append, rotary embedding) will be checked against.
//
// For each batch entry b, with entry = cache_batch_idx[b] (or b) and L = cache_seqlens[b]:
//   1. the new keys and values, if any (seqlen_new rows), are written to cache slots
//      [L, L + seqlen_new) of `entry`; the keys rotated at positions L + j when a rotary table
//      is given, the values as they are;
//   2. the queries are rotated (in a copy: q itself is not written) at positions L + i under a
//      causal mask or a window, else all at position L;
//   3. the rows attend to the cache's first L + seqlen_new slots under the policy, aligned to
//      the bottom-right corner of that key range (the policy sees the entry's batch index b).
// Caches are [entries, capacity, heads_kv, head_dim] or paged [pages, page_size, heads_kv,
// head_dim] through a block table [batch, pages per sequence] (FlashAttention's layouts);
// everything else is dense BSHD doubles.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashmma/attention/score_policy.hpp"
#include "support/policy_row.hpp"

namespace flashmma {
namespace test {

// Rotary position embedding of the first rotary_dim columns (the rest pass through):
//   kInterleaved (GPT-J, FlashAttention's default): pairs (2i, 2i + 1)
//   kHalves (GPT-NeoX): pairs (i, i + rotary_dim / 2)
// each pair (x, y) becoming (x cos - y sin, x sin + y cos) with cos and sin of entry i of the
// position's row of the tables ([positions, rotary_dim / 2]).
enum class RotaryStyle { kInterleaved, kHalves };

struct RotaryTable {
  int64_t rotary_dim = 0;  // 0: no rotary embedding
  RotaryStyle style = RotaryStyle::kInterleaved;
  std::vector<double> cos;  // [positions, rotary_dim / 2]
  std::vector<double> sin;

  // The usual table: angle p * base^(-2i / rotary_dim) for position p and pair i.
  static RotaryTable standard(int64_t rotary_dim, int64_t positions, RotaryStyle style,
                              double base = 10000.0) {
    RotaryTable t;
    t.rotary_dim = rotary_dim;
    t.style = style;
    const int64_t half = rotary_dim / 2;
    for (int64_t p = 0; p < positions; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * std::pow(base, -2.0 * i / rotary_dim);
        t.cos.push_back(std::cos(angle));
        t.sin.push_back(std::sin(angle));
      }
    }
    return t;
  }

  void rotate(double* x, int64_t position) const {
    const int64_t half = rotary_dim / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double c = cos[position * half + i], s = sin[position * half + i];
      const int64_t a = style == RotaryStyle::kInterleaved ? 2 * i : i;
      const int64_t b = style == RotaryStyle::kInterleaved ? 2 * i + 1 : i + half;
      const double x0 = x[a], x1 = x[b];
      x[a] = x0 * c - x1 * s;
      x[b] = x0 * s + x1 * c;
    }
  }
};

// A KV cache, contiguous or paged; row(entry, slot, head) is the head_dim values of a slot.
struct KVCache {
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t capacity = 0;   // slots per entry (contiguous), or page_size * pages per sequence
  int64_t page_size = 0;  // 0: contiguous, [entries, capacity, heads, head_dim]
  std::vector<int32_t> block_table;  // paged: [batch, capacity / page_size] physical pages
  std::vector<double> k;
  std::vector<double> v;

  int64_t offset(int64_t entry, int64_t slot, int64_t head) const {
    if (page_size == 0) return ((entry * capacity + slot) * heads + head) * head_dim;
    const int64_t pages_per_sequence = capacity / page_size;
    const int64_t page = block_table[entry * pages_per_sequence + slot / page_size];
    return ((page * page_size + slot % page_size) * heads + head) * head_dim;
  }
};

struct KVCacheCall {
  int64_t batch = 0, seqlen_q = 0, heads_q = 0, head_dim = 0;
  std::vector<double> q;              // [batch, seqlen_q, heads_q, head_dim]
  std::vector<int32_t> cache_seqlens;  // [batch]: valid slots before the call
  std::vector<int32_t> cache_batch_idx;  // empty, or [batch]: the cache entry of each row
  int64_t seqlen_new = 0;             // rows of k_new and v_new (0: no append)
  std::vector<double> k_new;          // [batch, seqlen_new, heads_kv, head_dim]
  std::vector<double> v_new;
  RotaryTable rotary;
  bool rotate_queries_per_row = false;  // causal or a window: query i at L + i, else at L
  double scale = 0.0;
  // Rounds a rotated value to the element type, as the kernels keep rotated keys (in the cache)
  // and rotated queries (in the workspace); nullptr keeps them exact.
  double (*round_rotated)(double) = nullptr;
};

struct KVCacheResult {
  std::vector<double> o;    // [batch, seqlen_q, heads_q, head_dim]
  std::vector<double> lse;  // [batch, heads_q, seqlen_q]
};

// Runs the call on `cache` (which it updates, as the kernels will) with `policy`.
template <class Policy>
KVCacheResult kvcache_reference(const KVCacheCall& call, KVCache& cache, const Policy& policy) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int64_t d = call.head_dim, hq = call.heads_q, hkv = cache.heads, sq = call.seqlen_q;
  KVCacheResult r;
  r.o.assign(static_cast<std::size_t>(call.batch * sq * hq * d), 0.0);
  r.lse.assign(static_cast<std::size_t>(call.batch * hq * sq), -kInf);
  std::vector<double> row(static_cast<std::size_t>(d)), query(row.size());
  for (int64_t b = 0; b < call.batch; ++b) {
    const int64_t entry = call.cache_batch_idx.empty() ? b : call.cache_batch_idx[b];
    const int64_t cached = call.cache_seqlens[b];
    for (int64_t j = 0; j < call.seqlen_new; ++j) {  // 1. append
      for (int64_t h = 0; h < hkv; ++h) {
        const int64_t from = ((b * call.seqlen_new + j) * hkv + h) * d;
        for (int64_t x = 0; x < d; ++x) row[x] = call.k_new[from + x];
        if (call.rotary.rotary_dim > 0) {
          call.rotary.rotate(row.data(), cached + j);
          if (call.round_rotated != nullptr) {
            for (double& x : row) x = call.round_rotated(x);
          }
        }
        const int64_t to = cache.offset(entry, cached + j, h);
        for (int64_t x = 0; x < d; ++x) {
          cache.k[to + x] = row[x];
          cache.v[to + x] = call.v_new[from + x];
        }
      }
    }
    const int64_t keys = cached + call.seqlen_new;
    const SequenceLengths lengths = sequence_lengths(sq, keys);
    std::vector<double> logits(static_cast<std::size_t>(keys));
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kvh = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t q_offset = ((b * sq + i) * hq + h) * d;
        for (int64_t x = 0; x < d; ++x) query[x] = call.q[q_offset + x];  // 2. rotate a copy
        if (call.rotary.rotary_dim > 0) {
          call.rotary.rotate(query.data(), call.rotate_queries_per_row ? cached + i : cached);
          if (call.round_rotated != nullptr) {
            for (double& x : query) x = call.round_rotated(x);
          }
        }
        const double row_max = policy_row_logits(  // 3. attend
            policy, b, h, i, lengths, call.scale,
            [&](int64_t j) {
              const double* k_row = &cache.k[cache.offset(entry, j, kvh)];
              double dot = 0;
              for (int64_t x = 0; x < d; ++x) dot += query[x] * k_row[x];
              return dot;
            },
            nullptr, logits.data());
        if (row_max == -kInf) continue;  // no visible key: O = 0, LSE = -inf
        const double lse = row_log_sum_exp(logits.data(), keys, row_max);
        r.lse[(b * hq + h) * sq + i] = lse;
        for (int64_t j = 0; j < keys; ++j) {
          if (logits[j] == -kInf) continue;
          const double p = std::exp(logits[j] - lse);
          const double* v_row = &cache.v[cache.offset(entry, j, kvh)];
          for (int64_t x = 0; x < d; ++x) r.o[q_offset + x] += p * v_row[x];
        }
      }
    }
  }
  return r;
}

}  // namespace test
}  // namespace flashmma
