// SPDX-License-Identifier: Apache-2.0
// The host-side description of one attention call: pointers, sizes and strides.
// Plain C++ (no CUDA headers) so that engines and tests can build it anywhere.
#pragma once

#include <cstdint>
#include <limits>

namespace flashmma {

// Element type of Q, K, V and O (all four share it). The LSE is always fp32.
enum class ScalarType : int { kFloat16, kBFloat16 };

// Which scores a query row may see.
//   kNone:   every key.
//   kCausal: key j is visible to query i iff j <= i + (seqlen_k - seqlen_q), i.e. the mask is
//            aligned to the bottom-right corner of the score matrix (FlashAttention >= 2.1).
//            A query row that sees no key produces O = 0 and LSE = -inf.
enum class MaskKind : int { kNone, kCausal };

// Strides are in elements, not bytes, and are signed 64-bit so that tensors of more than 2^31
// elements and any permutation of [batch, seq, head, dim] can be described. The last dimension
// (head_dim) must be contiguous.
struct TensorStrides {
  int64_t batch = 0;
  int64_t head = 0;
  int64_t row = 0;  // one step along the sequence
};

// Strides of a contiguous [batch, seq, heads, head_dim] tensor (FlashAttention's layout).
inline TensorStrides bshd_strides(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return TensorStrides{seqlen * heads * head_dim, head_dim, heads * head_dim};
}

// Strides of a contiguous [batch, heads, seq, head_dim] tensor.
inline TensorStrides bhsd_strides(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return TensorStrides{heads * seqlen * head_dim, seqlen * head_dim, head_dim};
}

// Everything the forward pass needs. Fill it, call validate() or let forward() do so.
//
//   O[b, s, h, :] = softmax(scale * Q[b, s, h, :] . K[b, :, h / group, :]^T) V[b, :, h / group, :]
//   LSE[b, h, s]  = log(sum_j exp(scale * Q[b, s, h, :] . K[b, j, h / group, :]))   (natural log)
//
// with group = heads_q / heads_kv (1: multi-head, heads_q: multi-query, else grouped-query).
struct ForwardParams {
  ScalarType dtype = ScalarType::kFloat16;

  const void* q = nullptr;  // [batch, seqlen_q, heads_q, head_dim] through q_strides
  const void* k = nullptr;  // [batch, seqlen_k, heads_kv, head_dim] through k_strides
  const void* v = nullptr;  // [batch, seqlen_k, heads_kv, head_dim] through v_strides
  void* o = nullptr;        // [batch, seqlen_q, heads_q, head_dim] through o_strides
  // Optional: fp32 [batch, heads_q, seqlen_q], contiguous. nullptr skips it.
  float* lse = nullptr;

  int64_t batch = 0;
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  // Any multiple of 8 up to 256; a kernel built for a larger head dim zero-fills the rest.
  int64_t head_dim = 0;

  TensorStrides q_strides;
  TensorStrides k_strides;
  TensorStrides v_strides;
  TensorStrides o_strides;

  // Multiplies Q.K^T before the softmax. NaN (the default) means 1 / sqrt(head_dim).
  float softmax_scale = std::numeric_limits<float>::quiet_NaN();

  MaskKind mask = MaskKind::kNone;
};

}  // namespace flashmma
