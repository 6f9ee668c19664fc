// SPDX-License-Identifier: Apache-2.0
// What this build's FLASHMMA_DISABLE_* definitions say (kernel_families.hpp lists them and what
// each leaves out of the default dispatch), as constexpr values: one KernelFamily per family, and
// whether a kernel head dim is held. The preprocessor is read here and nowhere else.
#pragma once

namespace flashmma {

// One family of the default dispatch's kernels: whether this build holds it, and what a message
// about it says.
struct KernelFamily {
  bool compiled;
  const char* kernels;  // "the dropout kernels"
  const char* macro;    // the definition that leaves them out
  const char* option;   // the CMake setting that builds them
};

namespace detail {
// One constant per definition, so that the families below are plain constexpr values.
#ifdef FLASHMMA_DISABLE_BACKWARD
inline constexpr bool kBackwardLeftOut = true;
#else
inline constexpr bool kBackwardLeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_DROPOUT
inline constexpr bool kDropoutLeftOut = true;
#else
inline constexpr bool kDropoutLeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_VARLEN
inline constexpr bool kVariableLengthLeftOut = true;
#else
inline constexpr bool kVariableLengthLeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_PAGEDKV
inline constexpr bool kPagedLeftOut = true;
#else
inline constexpr bool kPagedLeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_SLIDING_WINDOW
inline constexpr bool kWindowLeftOut = true;
#else
inline constexpr bool kWindowLeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_SOFTCAP
inline constexpr bool kSoftcapLeftOut = true;
#else
inline constexpr bool kSoftcapLeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_ALIBI
inline constexpr bool kAlibiLeftOut = true;
#else
inline constexpr bool kAlibiLeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_FP16
inline constexpr bool kFloat16LeftOut = true;
#else
inline constexpr bool kFloat16LeftOut = false;
#endif
#ifdef FLASHMMA_DISABLE_BF16
inline constexpr bool kBFloat16LeftOut = true;
#else
inline constexpr bool kBFloat16LeftOut = false;
#endif
}  // namespace detail

inline constexpr KernelFamily kBackwardFamily{
    !detail::kBackwardLeftOut, "the backward(params) kernels", "FLASHMMA_DISABLE_BACKWARD",
    "-DFLASHMMA_DISABLE_BACKWARD=OFF"};
inline constexpr KernelFamily kDropoutFamily{!detail::kDropoutLeftOut, "the dropout kernels",
                                             "FLASHMMA_DISABLE_DROPOUT",
                                             "-DFLASHMMA_DISABLE_DROPOUT=OFF"};
inline constexpr KernelFamily kVariableLengthFamily{
    !detail::kVariableLengthLeftOut, "the variable-length kernels", "FLASHMMA_DISABLE_VARLEN",
    "-DFLASHMMA_DISABLE_VARLEN=OFF"};
inline constexpr KernelFamily kPagedFamily{!detail::kPagedLeftOut, "the paged KV cache kernels",
                                           "FLASHMMA_DISABLE_PAGEDKV",
                                           "-DFLASHMMA_DISABLE_PAGEDKV=OFF"};
inline constexpr KernelFamily kWindowFamily{!detail::kWindowLeftOut, "the sliding-window kernels",
                                            "FLASHMMA_DISABLE_SLIDING_WINDOW",
                                            "-DFLASHMMA_DISABLE_SLIDING_WINDOW=OFF"};
inline constexpr KernelFamily kSoftcapFamily{!detail::kSoftcapLeftOut, "the softcap kernels",
                                             "FLASHMMA_DISABLE_SOFTCAP",
                                             "-DFLASHMMA_DISABLE_SOFTCAP=OFF"};
inline constexpr KernelFamily kAlibiFamily{!detail::kAlibiLeftOut, "the ALiBi kernels",
                                           "FLASHMMA_DISABLE_ALIBI",
                                           "-DFLASHMMA_DISABLE_ALIBI=OFF"};
inline constexpr KernelFamily kFloat16Family{!detail::kFloat16LeftOut, "the fp16 kernels",
                                             "FLASHMMA_KERNEL_DTYPES (FLASHMMA_DISABLE_FP16)",
                                             "-DFLASHMMA_KERNEL_DTYPES=\"...;fp16\""};
inline constexpr KernelFamily kBFloat16Family{!detail::kBFloat16LeftOut, "the bf16 kernels",
                                              "FLASHMMA_KERNEL_DTYPES (FLASHMMA_DISABLE_BF16)",
                                              "-DFLASHMMA_KERNEL_DTYPES=\"...;bf16\""};

// Whether this build holds the default kernels of a kernel head dim (kSupportedHeadDims).
constexpr bool head_dim_compiled(int kernel_head_dim) {
  switch (kernel_head_dim) {
#ifndef FLASHMMA_DISABLE_HEAD_DIM_32
    case 32:
#endif
#ifndef FLASHMMA_DISABLE_HEAD_DIM_64
    case 64:
#endif
#ifndef FLASHMMA_DISABLE_HEAD_DIM_96
    case 96:
#endif
#ifndef FLASHMMA_DISABLE_HEAD_DIM_128
    case 128:
#endif
#ifndef FLASHMMA_DISABLE_HEAD_DIM_160
    case 160:
#endif
#ifndef FLASHMMA_DISABLE_HEAD_DIM_192
    case 192:
#endif
#ifndef FLASHMMA_DISABLE_HEAD_DIM_224
    case 224:
#endif
#ifndef FLASHMMA_DISABLE_HEAD_DIM_256
    case 256:
#endif
      return true;
    default: return false;
  }
}

}  // namespace flashmma
