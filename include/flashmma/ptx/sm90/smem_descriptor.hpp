// SPDX-License-Identifier: Apache-2.0
// The 64-bit shared-memory matrix descriptor that wgmma takes for an operand in shared memory.
//
//   bits  0-13  start address >> 4     (the 18-bit shared-window address of the first element)
//   bits 16-29  leading byte offset >> 4  (LBO)
//   bits 32-45  stride byte offset >> 4   (SBO)
//   bits 49-51  base offset             (only for swizzled tiles not aligned to their pattern)
//   bits 62-63  swizzle: 0 none, 1 128B, 2 64B, 3 32B
//
// What LBO and SBO mean depends on the layout (K- or MN-major, swizzled or not): see
// operand_tile.hpp, which picks them. Blackwell's tcgen05 descriptors use another encoding
// (a fixed 0b001 at bits 46-48, a 3-bit swizzle at 61-63); do not mix the two. A wrong field gives
// silently wrong numbers, not a fault, hence the decoder: print what a descriptor says.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/sm90/swizzle.hpp"

namespace flashmma {
namespace ptx {
namespace sm90 {

inline constexpr uint32_t kDescriptorAddressMask = 0x3FFFF;  // shared memory is < 256 KiB
inline constexpr uint32_t kDescriptorFieldMask = 0x3FFF;     // 14-bit fields, in 16-byte units
inline constexpr uint32_t kDescriptorBaseOffsetMask = 0x7;
inline constexpr int kDescriptorUnitShift = 4;  // addresses and offsets are stored in 16 B units
inline constexpr int kLeadingOffsetBit = 16;
inline constexpr int kStrideOffsetBit = 32;
inline constexpr int kBaseOffsetBit = 49;
inline constexpr int kSwizzleBit = 62;

// The 2-bit code of a swizzle mode in the descriptor. Not the order of the Swizzle enum (nor of
// CUtensorMapSwizzle): 128B is 1 and 32B is 3.
FLASHMMA_HOST_DEVICE constexpr uint64_t descriptor_swizzle_code(Swizzle swizzle) {
  switch (swizzle) {
    case Swizzle::k128B: return 1;
    case Swizzle::k64B: return 2;
    case Swizzle::k32B: return 3;
    default: return 0;
  }
}

// A descriptor from byte quantities: the operand's shared-memory address (as ptx::smem_address
// returns it), LBO and SBO in bytes, all multiples of 16 (the low 4 bits are dropped).
FLASHMMA_HOST_DEVICE constexpr uint64_t make_smem_descriptor(uint32_t start_address,
                                                             uint32_t leading_byte_offset,
                                                             uint32_t stride_byte_offset,
                                                             Swizzle swizzle,
                                                             uint32_t base_offset = 0) {
  const uint64_t start = (start_address & kDescriptorAddressMask) >> kDescriptorUnitShift;
  const uint64_t leading = (leading_byte_offset >> kDescriptorUnitShift) & kDescriptorFieldMask;
  const uint64_t stride = (stride_byte_offset >> kDescriptorUnitShift) & kDescriptorFieldMask;
  const uint64_t base = base_offset & kDescriptorBaseOffsetMask;
  return start | (leading << kLeadingOffsetBit) | (stride << kStrideOffsetBit) |
         (base << kBaseOffsetBit) | (descriptor_swizzle_code(swizzle) << kSwizzleBit);
}

// The same descriptor for an operand `bytes` further on (a multiple of 16): the start address
// is the low field, so this is one add, as long as the address stays inside shared memory.
FLASHMMA_HOST_DEVICE constexpr uint64_t advance_smem_descriptor(uint64_t descriptor,
                                                                uint32_t bytes) {
  return descriptor + (bytes >> kDescriptorUnitShift);
}

// The fields of a descriptor, back in bytes: for tests and for printing one while debugging.
struct SmemDescriptorFields {
  uint32_t start_address;
  uint32_t leading_byte_offset;
  uint32_t stride_byte_offset;
  uint32_t base_offset;
  Swizzle swizzle;
};

FLASHMMA_HOST_DEVICE constexpr Swizzle swizzle_from_descriptor_code(uint64_t code) {
  switch (code) {
    case 1: return Swizzle::k128B;
    case 2: return Swizzle::k64B;
    case 3: return Swizzle::k32B;
    default: return Swizzle::kNone;
  }
}

// The 14-bit field at `bit`, in bytes.
FLASHMMA_HOST_DEVICE constexpr uint32_t descriptor_field_bytes(uint64_t descriptor, int bit) {
  return static_cast<uint32_t>((descriptor >> bit) & kDescriptorFieldMask) << kDescriptorUnitShift;
}

FLASHMMA_HOST_DEVICE constexpr SmemDescriptorFields decode_smem_descriptor(uint64_t descriptor) {
  return SmemDescriptorFields{
      descriptor_field_bytes(descriptor, 0), descriptor_field_bytes(descriptor, kLeadingOffsetBit),
      descriptor_field_bytes(descriptor, kStrideOffsetBit),
      static_cast<uint32_t>((descriptor >> kBaseOffsetBit) & kDescriptorBaseOffsetMask),
      swizzle_from_descriptor_code((descriptor >> kSwizzleBit) & 0x3)};
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
