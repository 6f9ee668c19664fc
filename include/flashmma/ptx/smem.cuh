// SPDX-License-Identifier: Apache-2.0
// Shared-memory address conversion for the instructions that take a .shared address.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {

// cvta.to.shared: the 32-bit shared-window address of a generic pointer into shared memory.
FLASHMMA_DEVICE uint32_t smem_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

}  // namespace ptx
}  // namespace flashmma
