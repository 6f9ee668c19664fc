// SPDX-License-Identifier: Apache-2.0
// What the library needs to know about each supported element type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flashmma/params.hpp"

namespace flashmma {

template <class Element>
struct ElementTraits;  // only fp16 and bf16 are supported

template <>
struct ElementTraits<__half> {
  static constexpr ScalarType kScalarType = ScalarType::kFloat16;
  static constexpr const char* kName = "fp16";
};

template <>
struct ElementTraits<__nv_bfloat16> {
  static constexpr ScalarType kScalarType = ScalarType::kBFloat16;
  static constexpr const char* kName = "bf16";
};

template <class Element, class = void>
struct IsSupportedElement {
  static constexpr bool value = false;
};
template <class Element>
struct IsSupportedElement<Element, decltype(void(ElementTraits<Element>::kScalarType))> {
  static constexpr bool value = true;
};

inline const char* scalar_type_name(ScalarType type) {
  return type == ScalarType::kFloat16 ? "fp16" : "bf16";
}

}  // namespace flashmma
