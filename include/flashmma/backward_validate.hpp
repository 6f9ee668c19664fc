// SPDX-License-Identifier: Apache-2.0
// Argument checking for the backward pass. Plain C++: the CPU tests exercise every message.
// backward() calls it before it touches the device; on error nothing is launched and nothing is
// written. The forward fields are checked by the forward's own validate_params (one definition of
// what a valid q, k, v, o, scale and variant are).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#include "flashmma/backward_params.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/backward_config.hpp"
#include "flashmma/traits/sm90_backward_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

namespace detail {

// The forward features the backward pass does not take yet, each named.
inline Status check_backward_supported(const BackwardParams& p) {
  const struct {
    const char* name;
    bool set;
  } fields[] = {{"seqused_k", p.seqused_k != nullptr},
                {"block_table", p.block_table != nullptr},
                {"kv_batch_index", p.kv_batch_index != nullptr},
                {"k_new", p.k_new != nullptr},
                {"v_new", p.v_new != nullptr}};
  for (const auto& field : fields) {
    if (field.set) {
      return invalid(std::string(field.name) +
                     " is set, but the backward pass takes dense or packed batches (cu_seqlens_q, "
                     "cu_seqlens_k) only: no seqused_k, paged caches, cache batch index or KV "
                     "appends yet; leave it null");
    }
  }
  if (p.num_splits > 1) {
    std::ostringstream os;
    os << "num_splits must be 0 or 1 for the backward pass, which does not split keys (got "
       << p.num_splits << ")";
    return invalid(os.str());
  }
  return Status::success();
}

}  // namespace detail

// Every config backward<Config> accepts: the portable BackwardTileConfig and the Hopper one.
template <class T>
struct IsBackwardConfig
    : std::integral_constant<bool, IsBackwardTileConfig<T>::value ||
                                       IsSm90BackwardTileConfig<T>::value> {};

// What a backward config requires of the call and the device (validate.hpp's
// validate_for_kernel and validate_for_device).
template <class Config, class Dropout = NoDropout>
KernelRequirements backward_kernel_requirements() {
  static_assert(IsBackwardConfig<Config>::value,
                "Config must be a flashmma::BackwardTileConfig<...> or "
                "flashmma::Sm90BackwardTileConfig<...>");
  KernelRequirements req = detail::config_requirements<Config, Dropout>();
  // cu_seqlens: the portable kernel takes them (validate_backward_params refuses seqused_k and
  // the rest first); the Hopper one takes dense batches.
  req.variable_lengths = !IsSm90BackwardTileConfig<Config>::value;
  req.paged_kv = false;
  return req;
}

// Checks the call alone: the forward's fields, the LSE, dO, dQ, dK, dV and the workspace.
[[nodiscard]] inline Status validate_backward_params(const BackwardParams& p) {
  if (Status s = detail::check_backward_supported(p); !s) return s;
  if (Status s = validate_params(p); !s) return s;
  if (p.lse == nullptr) {
    return detail::invalid(
        "lse is null: the backward pass needs the forward's LSE (fp32 [batch, heads_q, "
        "seqlen_q], natural log, as forward() writes it)");
  }
  // dO is read like Q; dQ, dK and dV are written, shaped as Q, K and V (packed as they are).
  const std::array<detail::TensorArgument, 4> forward = detail::forward_tensors(p);
  const detail::TensorArgument& q = forward[0];
  const detail::TensorArgument& k = forward[1];
  using detail::TensorAccess;
  const detail::TensorArgument gradients[] = {
      {"d_o", p.d_o, p.do_strides, q.batch, q.rows, q.heads, q.row_elements, TensorAccess::kRead,
       q.rows_name, q.heads_name, q.batch_name, "do_strides"},
      {"dq", p.dq, p.dq_strides, q.batch, q.rows, q.heads, q.row_elements,
       TensorAccess::kWritten, q.rows_name, q.heads_name, q.batch_name},
      {"dk", p.dk, p.dk_strides, k.batch, k.rows, k.heads, k.row_elements,
       TensorAccess::kWritten, k.rows_name, k.heads_name, k.batch_name},
      {"dv", p.dv, p.dv_strides, k.batch, k.rows, k.heads, k.row_elements,
       TensorAccess::kWritten, k.rows_name, k.heads_name, k.batch_name}};
  for (const detail::TensorArgument& t : gradients) {
    if (Status s = detail::check_tensor(t); !s) return s;
    const bool packed = t.batch_name == nullptr;
    if (packed && t.strides.batch != 0 && p.batch > 1) {
      std::ostringstream os;
      os << detail::strides_name(t) << ".batch must be 0 with "
         << (std::string(t.rows_name) == "total_q" ? "cu_seqlens_q: it is packed as q"
                                                 : "cu_seqlens_k: it is packed as k")
         << " (got " << t.strides.batch << ")";
      return detail::invalid(os.str());
    }
  }
  const std::size_t needed = backward_workspace_bytes(p);
  if (p.workspace == nullptr || p.workspace_bytes < needed) {
    std::ostringstream os;
    os << "workspace: the backward pass needs " << needed
       << " bytes (backward_workspace_bytes(params): the fp32 dQ accumulator and two fp32 values "
          "per query row), in params.workspace and params.workspace_bytes; got "
       << (p.workspace == nullptr ? std::string("none")
                                  : std::to_string(p.workspace_bytes) + " bytes");
    return detail::invalid(os.str());
  }
  return Status::success();
}

}  // namespace flashmma
