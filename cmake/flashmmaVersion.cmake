# flashmma_read_version(<header> <variable>): sets <variable> to "MAJOR.MINOR.PATCH" read from
# the FLASHMMA_VERSION_* macros of <header> (include/flashmma/version.hpp), the one place the
# version is written. Called before project(), which takes the version from it.
function(flashmma_read_version header variable)
  file(STRINGS ${header} lines REGEX "^#define FLASHMMA_VERSION_(MAJOR|MINOR|PATCH) +[0-9]+ *$")
  set(parts)
  foreach(part IN ITEMS MAJOR MINOR PATCH)
    if(NOT lines MATCHES "#define FLASHMMA_VERSION_${part} +([0-9]+)")
      message(FATAL_ERROR "${header}: no '#define FLASHMMA_VERSION_${part} <number>' line")
    endif()
    list(APPEND parts ${CMAKE_MATCH_1})
  endforeach()
  list(JOIN parts "." version)
  set(${variable} ${version} PARENT_SCOPE)
  # Configure again when the version changes.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${header})
endfunction()
