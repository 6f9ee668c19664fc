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

}  // namespace ptx
}  // namespace flashmma
