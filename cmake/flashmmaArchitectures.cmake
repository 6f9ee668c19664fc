# The CUDA architecture check. flashmma's kernels need sm_80 or newer (mma.sync on fp16/bf16,
# cp.async, ldmatrix). A target compiled for older architectures only still builds, yet every
# flashmma call in it returns kUnsupportedDevice at run time; and that is what a project gets
# when it sets no architectures at all, since CMake then takes the compiler's default (sm_75 for
# nvcc 13). The check turns that into a configure error, or a warning with the opt-out below.
#
# Used by flashmma's own CMakeLists.txt and, installed, by flashmmaConfig.cmake.

option(FLASHMMA_ALLOW_PRE_SM80_ARCHITECTURES
       "Warn, instead of failing, when flashmma is compiled for no CUDA architecture 80 or newer"
       OFF)

# flashmma's own build given `native`. CMake turns "native" into the plain architecture of each GPU
# it finds ("90-real" on an H100 or H200), and sm_90 code without the "a" features holds no
# Hopper kernel (wgmma, setmaxnreg): forward(params) would run the portable kernel there. So
# flashmma's own top-level build resolves "native" itself, before CUDA is enabled, with 90a for
# compute capability 9.0. It asks nvidia-smi, since CMake's own answer
# (CMAKE_CUDA_ARCHITECTURES_NATIVE) exists only once CUDA is enabled, when the build's
# architectures are already taken. A project that uses flashmma keeps whatever it chose: this runs
# only where flashmma is the top-level project.

# Sets <result> to the CUDA architectures of the compute capabilities in <capabilities> ("9.0",
# "8.0;8.6", as nvidia-smi prints them), one "-real" entry each, as CMake's own "native" does, with
# 90a for 9.0; sets <result> to "" when an entry is not a compute capability.
function(flashmma_architectures_of_capabilities capabilities result)
  set(architectures)
  foreach(capability IN LISTS capabilities)
    string(STRIP "${capability}" capability)
    if(NOT capability MATCHES "^([0-9]+)\\.([0-9]+)$")
      set(${result} "" PARENT_SCOPE)
      return()
    endif()
    set(architecture "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    if(architecture STREQUAL "90")
      set(architecture "90a")
    endif()
    list(APPEND architectures "${architecture}-real")
  endforeach()
  list(REMOVE_DUPLICATES architectures)
  set(${result} "${architectures}" PARENT_SCOPE)
endfunction()

# Sets <result> to the architectures of this machine's GPUs, asked of <nvidia_smi> (the path of
# nvidia-smi, or a false value when there is none), and <error> to why not when it cannot.
function(flashmma_detect_native_architectures nvidia_smi result error)
  set(${result} "" PARENT_SCOPE)
  set(${error} "" PARENT_SCOPE)
  if(NOT nvidia_smi)
    set(${error} "nvidia-smi was not found" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND "${nvidia_smi}" --query-gpu=compute_cap --format=csv,noheader
                  RESULT_VARIABLE exit_code
                  OUTPUT_VARIABLE output
                  ERROR_VARIABLE output
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX REPLACE "[\r\n]+" ";" capabilities "${output}")
  if(exit_code EQUAL 0 AND capabilities)
    flashmma_architectures_of_capabilities("${capabilities}" architectures)
  else()
    set(architectures "")
  endif()
  if(NOT architectures)
    string(STRIP "${output}" output)
    string(CONCAT text "`${nvidia_smi} --query-gpu=compute_cap` gave exit code ${exit_code} "
                       "and \"${output}\"")
    set(${error} "${text}" PARENT_SCOPE)
    return()
  endif()
  set(${result} "${architectures}" PARENT_SCOPE)
endfunction()

# Replaces a CMAKE_CUDA_ARCHITECTURES of "native" (given on the command line or through the
# CUDAARCHS environment variable) by this machine's architectures, in the calling directory's
# scope: the cache keeps "native", so every configure asks again. Without a GPU to ask, the
# configure stops, since CMake would otherwise fail on every target or a build would hold no
# Hopper kernel.
macro(flashmma_resolve_native_architectures)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(flashmma_requested_architectures "${CMAKE_CUDA_ARCHITECTURES}")
  else()
    set(flashmma_requested_architectures "$ENV{CUDAARCHS}")
  endif()
  if(flashmma_requested_architectures STREQUAL "native")
    find_program(FLASHMMA_NVIDIA_SMI nvidia-smi
                 DOC "nvidia-smi, which names the GPUs' compute capabilities for \"native\"")
    flashmma_detect_native_architectures("${FLASHMMA_NVIDIA_SMI}" flashmma_native_architectures
                                         flashmma_native_error)
    if(NOT flashmma_native_architectures)
      string(CONCAT flashmma_native_error
        "flashmma: the CUDA architectures are \"native\", the GPUs of this machine, and none "
        "could be found: ${flashmma_native_error}. Name the architectures instead: "
        "-DCMAKE_CUDA_ARCHITECTURES=90a for H100 and H200 (the Hopper kernels), 80 for A100, 86 "
        "or 89 for RTX 30xx/40xx and L4/L40, or \"80;90a\" for all of them.")
      message(FATAL_ERROR "${flashmma_native_error}")
    endif()
    message(STATUS "flashmma: CUDA architectures \"native\" are this machine's: "
                   "${flashmma_native_architectures}")
    set(CMAKE_CUDA_ARCHITECTURES "${flashmma_native_architectures}")
    unset(flashmma_native_architectures)
    unset(flashmma_native_error)
  endif()
  unset(flashmma_requested_architectures)
endmacro()

# flashmma's CMakeLists.txt includes this file before it enables CUDA; a consumer's
# find_package(flashmma) or add_subdirectory does not get here (PROJECT_IS_TOP_LEVEL).
if(PROJECT_NAME STREQUAL "flashmma" AND PROJECT_IS_TOP_LEVEL)
  flashmma_resolve_native_architectures()
endif()

# Sets <result> to TRUE when the list can hold flashmma's kernels: an entry of 80 or newer ("80",
# "90a", "86-real", "100f-virtual"), a keyword whose list has one or may have ("all",
# "all-major", "native": the building machine's GPUs), or no list (empty or OFF: the
# architectures come from compiler flags that CMake does not read).
function(flashmma_architectures_hold_sm80 architectures result)
  set(${result} TRUE PARENT_SCOPE)
  if("${architectures}" STREQUAL "" OR "${architectures}" STREQUAL "OFF")
    return()
  endif()
  foreach(architecture IN LISTS architectures)
    if(architecture MATCHES "^(native|all|all-major)$")
      return()
    endif()
    if(architecture MATCHES "^([0-9]+)" AND CMAKE_MATCH_1 GREATER_EQUAL 80)
      return()
    endif()
  endforeach()
  set(${result} FALSE PARENT_SCOPE)
endfunction()

# Fails (or warns, with FLASHMMA_ALLOW_PRE_SM80_ARCHITECTURES) when <architectures>, those of
# <what>, hold nothing flashmma's kernels can run on.
function(flashmma_check_architectures what architectures)
  flashmma_architectures_hold_sm80("${architectures}" holds_sm80)
  if(holds_sm80)
    return()
  endif()
  string(CONCAT text
    "flashmma: the CUDA architectures of ${what} are \"${architectures}\", none of them 80 or "
    "newer. flashmma's kernels need sm_80 or newer; built this way, every flashmma call returns "
    "kUnsupportedDevice. Set CUDA_ARCHITECTURES (or CMAKE_CUDA_ARCHITECTURES) to 80 or newer, "
    "e.g. \"80;90a\" or \"native\"")
  if(FLASHMMA_ALLOW_PRE_SM80_ARCHITECTURES)
    message(WARNING "${text}.")
  else()
    message(FATAL_ERROR "${text}, or configure with -DFLASHMMA_ALLOW_PRE_SM80_ARCHITECTURES=ON to "
                        "build it all the same.")
  endif()
endfunction()

# Sets <result> to TRUE when <target> links flashmma::flashmma or flashmma::kernels, directly or
# through other targets of the build (plain names and $<LINK_ONLY:...>; other generator
# expressions are not followed).
function(flashmma_target_links_flashmma target result)
  set(${result} FALSE PARENT_SCOPE)
  set(pending)
  set(seen ${target})
  foreach(property IN ITEMS LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(linked ${target} ${property})
    if(linked)
      list(APPEND pending ${linked})
    endif()
  endforeach()
  while(pending)
    list(POP_FRONT pending item)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.+)>$" "\\1" item "${item}")
    if(item IN_LIST seen OR NOT TARGET "${item}")
      continue()
    endif()
    list(APPEND seen ${item})
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
    if(item MATCHES "^(flashmma|flashmma_kernels|flashmma::flashmma|flashmma::kernels)$")
      set(${result} TRUE PARENT_SCOPE)
      return()
    endif()
    get_target_property(linked ${item} INTERFACE_LINK_LIBRARIES)
    if(linked)
      list(APPEND pending ${linked})
    endif()
  endwhile()
endfunction()

# Checks every target of the build that compiles .cu sources and links flashmma, except those
# whose FLASHMMA_ALLOW_PRE_SM80_ARCHITECTURES property is true (a deliberate pre-sm_80 build).
function(flashmma_check_target_architectures)
  set(directories ${CMAKE_SOURCE_DIR})
  while(directories)
    list(POP_FRONT directories directory)
    get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
    list(APPEND directories ${subdirectories})
    get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      get_target_property(allowed ${target} FLASHMMA_ALLOW_PRE_SM80_ARCHITECTURES)
      if(type MATCHES "^(INTERFACE_LIBRARY|UTILITY)$" OR allowed)
        continue()
      endif()
      get_target_property(sources ${target} SOURCES)
      list(FILTER sources INCLUDE REGEX "\\.cu$")
      if(NOT sources)
        continue()
      endif()
      flashmma_target_links_flashmma(${target} links)
      if(links)
        get_target_property(architectures ${target} CUDA_ARCHITECTURES)
        flashmma_check_architectures("target '${target}'" "${architectures}")
      endif()
    endforeach()
  endwhile()
endfunction()

# Runs flashmma_check_target_architectures once, when the top-level CMakeLists.txt has been read
# and every target exists.
function(flashmma_check_target_architectures_at_end)
  get_property(scheduled GLOBAL PROPERTY FLASHMMA_ARCHITECTURE_CHECK_SCHEDULED)
  if(NOT scheduled)
    set_property(GLOBAL PROPERTY FLASHMMA_ARCHITECTURE_CHECK_SCHEDULED TRUE)
    cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR}
                   CALL flashmma_check_target_architectures)
  endif()
endfunction()
