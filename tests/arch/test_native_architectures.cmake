# How flashmma's own build resolves CMAKE_CUDA_ARCHITECTURES=native (flashmmaArchitectures.cmake),
# with stand-ins for nvidia-smi written to WORK_DIR, so that no GPU is needed:
#   cmake -DWORK_DIR=<dir> [-DEXPECT_FAILURE=ON] -P test_native_architectures.cmake
# With EXPECT_FAILURE, "native" on a machine without a GPU must stop the configure (the caller
# checks the message).
cmake_minimum_required(VERSION 3.24)
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/flashmmaArchitectures.cmake)

function(expect_equal what actual expected)
  if(NOT "${actual}" STREQUAL "${expected}")
    message(SEND_ERROR "${what}: got \"${actual}\", expected \"${expected}\"")
  endif()
endfunction()

# A stand-in that prints `output` and exits with `exit_code`, as nvidia-smi would.
function(write_stand_in name output exit_code)
  file(WRITE ${WORK_DIR}/${name} "#!/bin/sh\nprintf '${output}'\nexit ${exit_code}\n")
  file(CHMOD ${WORK_DIR}/${name} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endfunction()
file(MAKE_DIRECTORY ${WORK_DIR})
write_stand_in(hopper "9.0\\n" 0)
write_stand_in(mixed "8.0\\n9.0\\n9.0\\n8.6\\n" 0)
write_stand_in(no_device "No devices were found\\n" 6)
write_stand_in(old_driver "Field \"compute_cap\" is not a valid field to query.\\n" 2)

if(EXPECT_FAILURE)
  set(FLASHMMA_NVIDIA_SMI ${WORK_DIR}/no_device)
  set(CMAKE_CUDA_ARCHITECTURES native)
  flashmma_resolve_native_architectures()
  message(FATAL_ERROR
          "a machine without a GPU resolved \"native\" to \"${CMAKE_CUDA_ARCHITECTURES}\"")
endif()

# Compute capability 9.0 is built as 90a, where the Hopper kernels exist; the others as they are,
# including those below 80, which flashmma_check_architectures then refuses.
flashmma_architectures_of_capabilities("9.0" result)
expect_equal("9.0" "${result}" "90a-real")
flashmma_architectures_of_capabilities("8.0;8.6;8.0;8.9" result)
expect_equal("8.0;8.6;8.0;8.9" "${result}" "80-real;86-real;89-real")
flashmma_architectures_of_capabilities("10.0; 12.0" result)
expect_equal("10.0; 12.0" "${result}" "100-real;120-real")
flashmma_architectures_of_capabilities("7.5" result)
expect_equal("7.5" "${result}" "75-real")
flashmma_architectures_of_capabilities("9.0;[N/A]" result)
expect_equal("9.0;[N/A]" "${result}" "")

flashmma_detect_native_architectures(${WORK_DIR}/hopper result error)
expect_equal("one H100" "${result}" "90a-real")
expect_equal("one H100's error" "${error}" "")
flashmma_detect_native_architectures(${WORK_DIR}/mixed result error)
expect_equal("an A100, two H100s and an RTX 3090" "${result}" "80-real;90a-real;86-real")
foreach(stand_in IN ITEMS no_device old_driver)
  flashmma_detect_native_architectures(${WORK_DIR}/${stand_in} result error)
  expect_equal("${stand_in}" "${result}" "")
  if(NOT error MATCHES "gave exit code [0-9]+")
    message(SEND_ERROR "${stand_in}: the error does not say what nvidia-smi answered: ${error}")
  endif()
endforeach()
flashmma_detect_native_architectures(FLASHMMA_NVIDIA_SMI-NOTFOUND result error)
expect_equal("no nvidia-smi" "${error}" "nvidia-smi was not found")

# The resolution replaces "native" only, whether it came as a variable or through CUDAARCHS.
set(FLASHMMA_NVIDIA_SMI ${WORK_DIR}/hopper)
set(CMAKE_CUDA_ARCHITECTURES native)
flashmma_resolve_native_architectures()
expect_equal("CMAKE_CUDA_ARCHITECTURES=native" "${CMAKE_CUDA_ARCHITECTURES}" "90a-real")
set(CMAKE_CUDA_ARCHITECTURES "80;90a")
flashmma_resolve_native_architectures()
expect_equal("CMAKE_CUDA_ARCHITECTURES=80;90a" "${CMAKE_CUDA_ARCHITECTURES}" "80;90a")
unset(CMAKE_CUDA_ARCHITECTURES)
set(ENV{CUDAARCHS} native)
flashmma_resolve_native_architectures()
expect_equal("CUDAARCHS=native" "${CMAKE_CUDA_ARCHITECTURES}" "90a-real")
