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
