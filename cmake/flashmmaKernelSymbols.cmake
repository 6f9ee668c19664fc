# Counts flashmma's forward and backward kernels in object files, from their host-side symbols
# (every kernel a translation unit compiles leaves a launch stub named after it):
#
#   cmake -DNM=<nm> -DOBJECTS=<object;...> -DEXPECT=none|some -P flashmmaKernelSymbols.cmake
#
# EXPECT=none fails when any object holds a kernel (a program on flashmma::kernels must compile
# none); EXPECT=some fails when none does (the header-only control, which shows the count works).
foreach(variable IN ITEMS NM OBJECTS EXPECT)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "flashmmaKernelSymbols.cmake needs -D${variable}=...")
  endif()
endforeach()

set(count 0)
foreach(object IN LISTS OBJECTS)
  execute_process(COMMAND ${NM} ${object} OUTPUT_VARIABLE symbols RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${NM} ${object} failed (${result})")
  endif()
  # Every forward or backward kernel is kernel_entry<...ForwardKernel<...>> or
  # kernel_entry<...BackwardKernel<...>>: its mangled name holds one of these.
  string(REGEX MATCHALL "[^\n]*(13ForwardKernel|14BackwardKernel)[^\n]*" kernels "${symbols}")
  list(LENGTH kernels object_count)
  message(STATUS "${object}: ${object_count} forward and backward kernel symbols")
  math(EXPR count "${count} + ${object_count}")
endforeach()

if(EXPECT STREQUAL "none" AND count GREATER 0)
  message(FATAL_ERROR "expected no forward or backward kernel, found ${count} symbols")
elseif(EXPECT STREQUAL "some" AND count EQUAL 0)
  message(FATAL_ERROR "expected kernels, found none")
endif()
