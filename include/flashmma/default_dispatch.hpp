// SPDX-License-Identifier: Apache-2.0
// Which kernel flashmma::forward(params, stream) runs: the choice itself, written once, and a
// description of it for people. Host code: it names configs but compiles no kernel, so a host
// translation unit can ask what would run.
//
//   std::string kernel;
//   if (flashmma::Status s = flashmma::describe_default_kernel(params, device, kernel); s)
//     std::printf("%s\n", kernel.c_str());
//   // sm80::ForwardKernel<TileConfig<fp16, HeadDim 128, BlockM 256, BlockN 64, 8 warps,
//   //   2 stages, XOR swizzle, 1 block/SM, rescale before exp, sm_80>, FullAttention,
//   //   PlainScheduler>
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

// Calls visit(Config{}) with the default config of one kernel head dim that forward() runs for
// this mask on a device with `smem_per_block_optin` bytes of shared memory per block.
template <class Element, int HeadDim, class Visitor>
decltype(auto) visit_default_config(bool causal, std::size_t smem_per_block_optin,
                                    Visitor&& visit) {
  using Defaults = DefaultConfig<Element, HeadDim>;
  switch (default_tile<Element, HeadDim>(causal, smem_per_block_optin)) {
    case DefaultTile::kCausal: return visit(typename Defaults::causal{});
    case DefaultTile::kCompact: return visit(typename Defaults::compact{});
    case DefaultTile::kGeneral: break;
  }
  return visit(typename Defaults::type{});
}

// Calls visit(std::integral_constant<int, D>{}) for the kernel head dim D that serves
// `head_dim`, or out_of_range() when none does.
template <class Visitor, class OutOfRange>
decltype(auto) visit_kernel_head_dim(int64_t head_dim, Visitor&& visit, OutOfRange&& out_of_range) {
  switch (kernel_head_dim_for(head_dim)) {
    case 32: return visit(std::integral_constant<int, 32>{});
    case 64: return visit(std::integral_constant<int, 64>{});
    case 96: return visit(std::integral_constant<int, 96>{});
    case 128: return visit(std::integral_constant<int, 128>{});
    case 160: return visit(std::integral_constant<int, 160>{});
    case 192: return visit(std::integral_constant<int, 192>{});
    case 224: return visit(std::integral_constant<int, 224>{});
    case 256: return visit(std::integral_constant<int, 256>{});
    default: return out_of_range();
  }
}

// "TileConfig<fp16, HeadDim 128, BlockM 256, BlockN 64, 8 warps, 2 stages, XOR swizzle,
// 1 block/SM, rescale before exp, sm_80>": every knob of a config, by name.
template <class Config>
std::string describe_config() {
  static_assert(IsTileConfig<Config>::value, "Config must be a flashmma::TileConfig<...>");
  std::ostringstream os;
  os << "TileConfig<" << ElementTraits<typename Config::element_type>::kName << ", HeadDim "
     << Config::kHeadDim << ", BlockM " << Config::kBlockM << ", BlockN " << Config::kBlockN
     << ", " << Config::kWarps << " warps, " << Config::kStages << " stages, "
     << (Config::kSmemLayout == SmemLayout::kXorSwizzle ? "XOR swizzle" : "padded rows") << ", "
     << Config::kMinBlocksPerSm << " block/SM, rescale "
     << (Config::kRescaleBeforeExp ? "before" : "after") << " exp, "
     << Config::arch_tag::kName << ">";
  return os.str();
}

// The kernel forward(params) would launch on `device`, as "sm80::ForwardKernel<TileConfig<...>,
// policy, scheduler>"; an invalid `params` gets validate_params()'s error instead.
[[nodiscard]] inline Status describe_default_kernel(const ForwardParams& params,
                                                    const DeviceInfo& device,
                                                    std::string& description) {
  if (Status s = validate_params(params); !s) return s;
  const bool causal = params.mask == MaskKind::kCausal;
  const auto describe = [&](auto element_tag) {
    using Element = decltype(element_tag);
    return visit_kernel_head_dim(
        params.head_dim,
        [&](auto head_dim) {
          return visit_default_config<Element, decltype(head_dim)::value>(
              causal, device.smem_per_block_optin,
              [](auto config) { return describe_config<decltype(config)>(); });
        },
        [] { return std::string(); });
  };
  description = params.dtype == ScalarType::kFloat16 ? describe(__half{})
                                                     : describe(__nv_bfloat16{});
  description = "sm80::ForwardKernel<" + description +
                (causal ? ", CausalMask, HeaviestFirstScheduler>" : ", FullAttention, PlainScheduler>");
  return Status::success();
}

}  // namespace flashmma
