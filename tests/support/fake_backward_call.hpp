// SPDX-License-Identifier: Apache-2.0
// A valid backward call (and so, through its base, a valid forward call) over fake device
// addresses, for the validation tests: validation never dereferences a pointer, so any aligned
// address stands in for device memory. GQA (8 query heads over 2), every tensor a contiguous
// [batch, seq, heads, head_dim], and a workspace of the size the call needs.
#pragma once

#include <cstdint>

#include "flashmma/backward_params.hpp"
#include "flashmma/params.hpp"
#include "flashmma/problem_shape.hpp"

namespace flashmma {
namespace test {

inline void* fake_pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }
inline const int32_t* fake_int32(std::uintptr_t address) {
  return reinterpret_cast<const int32_t*>(address);
}

inline BackwardParams fake_backward_call(ScalarType dtype = ScalarType::kFloat16) {
  BackwardParams p;
  p.dtype = dtype;
  static_cast<ProblemShape&>(p) = make_problem_shape(2, 100, 130, 8, 2, 64);
  p.q = fake_pointer(0x10000);
  p.k = fake_pointer(0x20000);
  p.v = fake_pointer(0x30000);
  p.o = fake_pointer(0x40000);
  p.lse = static_cast<float*>(fake_pointer(0x50000));
  p.d_o = fake_pointer(0x60000);
  p.dq = fake_pointer(0x70000);
  p.dk = fake_pointer(0x80000);
  p.dv = fake_pointer(0x90000);
  p.q_strides = p.o_strides = p.do_strides = p.dq_strides =
      bshd_strides(p.seqlen_q, p.heads_q, p.head_dim);
  p.k_strides = p.v_strides = p.dk_strides = p.dv_strides =
      bshd_strides(p.seqlen_k, p.heads_kv, p.head_dim);
  p.workspace = fake_pointer(0x100000);
  p.workspace_bytes = backward_workspace_bytes(p);
  return p;
}

}  // namespace test
}  // namespace flashmma
