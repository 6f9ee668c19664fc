// SPDX-License-Identifier: Apache-2.0
// The instruction strings of wgmma.mma_async m64nNk16 (fp16/bf16 inputs, fp32 accumulators) for
// every N that is a multiple of 16 from 16 to 256. wgmma.cuh is the interface; this file only
// spells the instructions out.
//
// Why macros here, against the habit of one plain function per instruction: an m64nNk16 takes its
// N / 2 accumulators as one brace list of scalar registers, and inline asm accepts neither a
// computed template string nor a parameter-pack expansion in its operand list (nvcc 13.0 rejects
// both). So the string and the operand list of each N are written out once, built eight registers
// at a time, and FLASHMMA_WGMMA_DEFINE_SHAPE stamps out the four instructions of a shape (SS and
// RS, fp16 and bf16). Every macro is #undef'd at the end of this file.
//
// Operand numbering inside each asm: %0 .. %(N/2 - 1) are the accumulators ("+f": C and D);
// then, numbered from R0 = N/2, scale-d (R0), imm-trans-b (R1, an "n" immediate), the B
// descriptor (R2), and the A descriptor (R3) and imm-trans-a (R4, SS) or the four A registers
// (R3 .. R6, RS). imm-scale-a and imm-scale-b are 1; RS has no imm-trans-a (registers hold A
// K-major).
// scale-d becomes a predicate inside the asm (setp.ne), so it can be a runtime value.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashmma/macros.hpp"

#if defined(FLASHMMA_SM90A_ENABLED)

namespace flashmma {
namespace ptx {
namespace sm90 {
namespace detail {

// Wgmma<N, Element>::ss<trans_a, trans_b>(d, desc_a, desc_b, scale_d) and ::rs<trans_b>(d, a,
// desc_b, scale_d): one instruction each, defined below for the supported N.
template <int N, class Element>
struct Wgmma;

// "%0, %1, ..., %(N/2 - 1)": the accumulator list of m64nNk16.
#define FLASHMMA_WGMMA_REGISTERS_16 "%0, %1, %2, %3, %4, %5, %6, %7"
#define FLASHMMA_WGMMA_REGISTERS_32 \
  FLASHMMA_WGMMA_REGISTERS_16 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define FLASHMMA_WGMMA_REGISTERS_48 \
  FLASHMMA_WGMMA_REGISTERS_32 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define FLASHMMA_WGMMA_REGISTERS_64 \
  FLASHMMA_WGMMA_REGISTERS_48 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define FLASHMMA_WGMMA_REGISTERS_80 \
  FLASHMMA_WGMMA_REGISTERS_64 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define FLASHMMA_WGMMA_REGISTERS_96 \
  FLASHMMA_WGMMA_REGISTERS_80 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define FLASHMMA_WGMMA_REGISTERS_112 \
  FLASHMMA_WGMMA_REGISTERS_96 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define FLASHMMA_WGMMA_REGISTERS_128 \
  FLASHMMA_WGMMA_REGISTERS_112 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define FLASHMMA_WGMMA_REGISTERS_144 \
  FLASHMMA_WGMMA_REGISTERS_128 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define FLASHMMA_WGMMA_REGISTERS_160 \
  FLASHMMA_WGMMA_REGISTERS_144 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define FLASHMMA_WGMMA_REGISTERS_176 \
  FLASHMMA_WGMMA_REGISTERS_160 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define FLASHMMA_WGMMA_REGISTERS_192 \
  FLASHMMA_WGMMA_REGISTERS_176 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define FLASHMMA_WGMMA_REGISTERS_208 \
  FLASHMMA_WGMMA_REGISTERS_192 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define FLASHMMA_WGMMA_REGISTERS_224 \
  FLASHMMA_WGMMA_REGISTERS_208 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define FLASHMMA_WGMMA_REGISTERS_240 \
  FLASHMMA_WGMMA_REGISTERS_224 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define FLASHMMA_WGMMA_REGISTERS_256 \
  FLASHMMA_WGMMA_REGISTERS_240 ", %120, %121, %122, %123, %124, %125, %126, %127"

// "+f"(d[0]), ..., "+f"(d[N/2 - 1]): the accumulator operands of m64nNk16.
#define FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(first)                                                  \
  "+f"(d[first]), "+f"(d[first + 1]), "+f"(d[first + 2]), "+f"(d[first + 3]),                     \
      "+f"(d[first + 4]), "+f"(d[first + 5]), "+f"(d[first + 6]), "+f"(d[first + 7])
#define FLASHMMA_WGMMA_ACCUMULATORS_16 FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(0)
#define FLASHMMA_WGMMA_ACCUMULATORS_32 \
  FLASHMMA_WGMMA_ACCUMULATORS_16, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(8)
#define FLASHMMA_WGMMA_ACCUMULATORS_48 \
  FLASHMMA_WGMMA_ACCUMULATORS_32, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(16)
#define FLASHMMA_WGMMA_ACCUMULATORS_64 \
  FLASHMMA_WGMMA_ACCUMULATORS_48, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(24)
#define FLASHMMA_WGMMA_ACCUMULATORS_80 \
  FLASHMMA_WGMMA_ACCUMULATORS_64, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(32)
#define FLASHMMA_WGMMA_ACCUMULATORS_96 \
  FLASHMMA_WGMMA_ACCUMULATORS_80, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(40)
#define FLASHMMA_WGMMA_ACCUMULATORS_112 \
  FLASHMMA_WGMMA_ACCUMULATORS_96, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(48)
#define FLASHMMA_WGMMA_ACCUMULATORS_128 \
  FLASHMMA_WGMMA_ACCUMULATORS_112, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(56)
#define FLASHMMA_WGMMA_ACCUMULATORS_144 \
  FLASHMMA_WGMMA_ACCUMULATORS_128, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(64)
#define FLASHMMA_WGMMA_ACCUMULATORS_160 \
  FLASHMMA_WGMMA_ACCUMULATORS_144, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(72)
#define FLASHMMA_WGMMA_ACCUMULATORS_176 \
  FLASHMMA_WGMMA_ACCUMULATORS_160, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(80)
#define FLASHMMA_WGMMA_ACCUMULATORS_192 \
  FLASHMMA_WGMMA_ACCUMULATORS_176, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(88)
#define FLASHMMA_WGMMA_ACCUMULATORS_208 \
  FLASHMMA_WGMMA_ACCUMULATORS_192, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(96)
#define FLASHMMA_WGMMA_ACCUMULATORS_224 \
  FLASHMMA_WGMMA_ACCUMULATORS_208, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(104)
#define FLASHMMA_WGMMA_ACCUMULATORS_240 \
  FLASHMMA_WGMMA_ACCUMULATORS_224, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(112)
#define FLASHMMA_WGMMA_ACCUMULATORS_256 \
  FLASHMMA_WGMMA_ACCUMULATORS_240, FLASHMMA_WGMMA_EIGHT_ACCUMULATORS(120)

// The SS and RS instructions of one (N, element type); R0 .. R6 are N/2 .. N/2 + 6.
#define FLASHMMA_WGMMA_DEFINE(N, ElementType, kTypes, R0, R1, R2, R3, R4, R5, R6)                 \
  template <>                                                                                     \
  struct Wgmma<N, ElementType> {                                                                  \
    template <int kTransposeA, int kTransposeB>                                                   \
    static FLASHMMA_DEVICE void ss(float (&d)[R0], uint64_t desc_a, uint64_t desc_b,              \
                                   uint32_t scale_d) {                                            \
      asm volatile(                                                                               \
          "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %" #R0 ", 0;\n"                     \
          "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32" kTypes "\n"                            \
          "{" FLASHMMA_WGMMA_REGISTERS_##N "},\n"                                                 \
          "%" #R3 ", %" #R2 ", accumulate, 1, 1, %" #R4 ", %" #R1 ";\n}\n"                        \
          : FLASHMMA_WGMMA_ACCUMULATORS_##N                                                       \
          : "r"(scale_d), "n"(kTransposeB), "l"(desc_b), "l"(desc_a), "n"(kTransposeA));          \
    }                                                                                             \
    template <int kTransposeB>                                                                    \
    static FLASHMMA_DEVICE void rs(float (&d)[R0], const uint32_t (&a)[4], uint64_t desc_b,       \
                                   uint32_t scale_d) {                                            \
      asm volatile(                                                                               \
          "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %" #R0 ", 0;\n"                     \
          "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32" kTypes "\n"                            \
          "{" FLASHMMA_WGMMA_REGISTERS_##N "},\n"                                                 \
          "{%" #R3 ", %" #R4 ", %" #R5 ", %" #R6 "}, %" #R2 ", accumulate, 1, 1, %" #R1 ";\n}\n"  \
          : FLASHMMA_WGMMA_ACCUMULATORS_##N                                                       \
          : "r"(scale_d), "n"(kTransposeB), "l"(desc_b), "r"(a[0]), "r"(a[1]), "r"(a[2]),         \
            "r"(a[3]));                                                                           \
    }                                                                                             \
  };

#define FLASHMMA_WGMMA_DEFINE_SHAPE(N, R0, R1, R2, R3, R4, R5, R6)                                \
  FLASHMMA_WGMMA_DEFINE(N, __half, ".f16.f16", R0, R1, R2, R3, R4, R5, R6)                        \
  FLASHMMA_WGMMA_DEFINE(N, __nv_bfloat16, ".bf16.bf16", R0, R1, R2, R3, R4, R5, R6)

FLASHMMA_WGMMA_DEFINE_SHAPE(16, 8, 9, 10, 11, 12, 13, 14)
FLASHMMA_WGMMA_DEFINE_SHAPE(32, 16, 17, 18, 19, 20, 21, 22)
FLASHMMA_WGMMA_DEFINE_SHAPE(48, 24, 25, 26, 27, 28, 29, 30)
FLASHMMA_WGMMA_DEFINE_SHAPE(64, 32, 33, 34, 35, 36, 37, 38)
FLASHMMA_WGMMA_DEFINE_SHAPE(80, 40, 41, 42, 43, 44, 45, 46)
FLASHMMA_WGMMA_DEFINE_SHAPE(96, 48, 49, 50, 51, 52, 53, 54)
FLASHMMA_WGMMA_DEFINE_SHAPE(112, 56, 57, 58, 59, 60, 61, 62)
FLASHMMA_WGMMA_DEFINE_SHAPE(128, 64, 65, 66, 67, 68, 69, 70)
FLASHMMA_WGMMA_DEFINE_SHAPE(144, 72, 73, 74, 75, 76, 77, 78)
FLASHMMA_WGMMA_DEFINE_SHAPE(160, 80, 81, 82, 83, 84, 85, 86)
FLASHMMA_WGMMA_DEFINE_SHAPE(176, 88, 89, 90, 91, 92, 93, 94)
FLASHMMA_WGMMA_DEFINE_SHAPE(192, 96, 97, 98, 99, 100, 101, 102)
FLASHMMA_WGMMA_DEFINE_SHAPE(208, 104, 105, 106, 107, 108, 109, 110)
FLASHMMA_WGMMA_DEFINE_SHAPE(224, 112, 113, 114, 115, 116, 117, 118)
FLASHMMA_WGMMA_DEFINE_SHAPE(240, 120, 121, 122, 123, 124, 125, 126)
FLASHMMA_WGMMA_DEFINE_SHAPE(256, 128, 129, 130, 131, 132, 133, 134)

#undef FLASHMMA_WGMMA_DEFINE_SHAPE
#undef FLASHMMA_WGMMA_DEFINE
#undef FLASHMMA_WGMMA_EIGHT_ACCUMULATORS
#undef FLASHMMA_WGMMA_REGISTERS_16
#undef FLASHMMA_WGMMA_REGISTERS_32
#undef FLASHMMA_WGMMA_REGISTERS_48
#undef FLASHMMA_WGMMA_REGISTERS_64
#undef FLASHMMA_WGMMA_REGISTERS_80
#undef FLASHMMA_WGMMA_REGISTERS_96
#undef FLASHMMA_WGMMA_REGISTERS_112
#undef FLASHMMA_WGMMA_REGISTERS_128
#undef FLASHMMA_WGMMA_REGISTERS_144
#undef FLASHMMA_WGMMA_REGISTERS_160
#undef FLASHMMA_WGMMA_REGISTERS_176
#undef FLASHMMA_WGMMA_REGISTERS_192
#undef FLASHMMA_WGMMA_REGISTERS_208
#undef FLASHMMA_WGMMA_REGISTERS_224
#undef FLASHMMA_WGMMA_REGISTERS_240
#undef FLASHMMA_WGMMA_REGISTERS_256
#undef FLASHMMA_WGMMA_ACCUMULATORS_16
#undef FLASHMMA_WGMMA_ACCUMULATORS_32
#undef FLASHMMA_WGMMA_ACCUMULATORS_48
#undef FLASHMMA_WGMMA_ACCUMULATORS_64
#undef FLASHMMA_WGMMA_ACCUMULATORS_80
#undef FLASHMMA_WGMMA_ACCUMULATORS_96
#undef FLASHMMA_WGMMA_ACCUMULATORS_112
#undef FLASHMMA_WGMMA_ACCUMULATORS_128
#undef FLASHMMA_WGMMA_ACCUMULATORS_144
#undef FLASHMMA_WGMMA_ACCUMULATORS_160
#undef FLASHMMA_WGMMA_ACCUMULATORS_176
#undef FLASHMMA_WGMMA_ACCUMULATORS_192
#undef FLASHMMA_WGMMA_ACCUMULATORS_208
#undef FLASHMMA_WGMMA_ACCUMULATORS_224
#undef FLASHMMA_WGMMA_ACCUMULATORS_240
#undef FLASHMMA_WGMMA_ACCUMULATORS_256

}  // namespace detail
}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma

#endif  // FLASHMMA_SM90A_ENABLED
