// SPDX-License-Identifier: Apache-2.0
// Special-function instructions the softmax uses.
#pragma once

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {

// ex2.approx.ftz.f32: 2^x, one MUFU instruction (relative error ~2^-22). ex2(-inf) = +0, which the
// softmax relies on for masked scores. Available on every architecture, so unguarded.
FLASHMMA_DEVICE float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) = sign(x) (1 - 2 / (e^(2|x|) + 1)), from two MUFU instructions (ex2 and the
// reciprocal of __fdividef). Its absolute error stays near 1e-7 over the whole range (large |x|
// gives e = inf and exactly +-1), against several times that relative error for the one-instruction
// tanh.approx.f32 (about 2^-11), which would show in a softcap's logits; libdevice's tanhf is
// exact to an ulp but branches and costs several times more per score.
FLASHMMA_DEVICE float tanh_fast(float x) {
  const float e = ex2_approx(fabsf(x) * 2.8853900817779268f);  // e^(2|x|) = 2^(2|x| log2(e))
  return copysignf(1.f - __fdividef(2.f, e + 1.f), x);
}

}  // namespace ptx
}  // namespace flashmma
