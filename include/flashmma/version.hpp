// SPDX-License-Identifier: Apache-2.0
// flashmma's version: the one source of it. CMake's project() version and the PyTorch
// extension's package version are both read from the three lines below.
#pragma once

#define FLASHMMA_VERSION_MAJOR 0
#define FLASHMMA_VERSION_MINOR 3
#define FLASHMMA_VERSION_PATCH 0

// One number that compares in order: 10000 * major + 100 * minor + patch.
#define FLASHMMA_VERSION \
  (FLASHMMA_VERSION_MAJOR * 10000 + FLASHMMA_VERSION_MINOR * 100 + FLASHMMA_VERSION_PATCH)
