# tpusim_target_defaults(<target>): warnings and include roots for tpusim's own code.
# Headers are included by their path from the repository root ("sim/mxu.h"); generated
# headers (protobuf, embedded files) by their path under build/gen.
set(TPUSIM_GEN_DIR ${PROJECT_BINARY_DIR}/gen)
file(MAKE_DIRECTORY ${TPUSIM_GEN_DIR})

function(tpusim_target_defaults target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<BUILD_INTERFACE:${TPUSIM_GEN_DIR}> $<INSTALL_INTERFACE:include>)
    return()
  endif()
  # Installed, the headers (and the generated ones) are under <prefix>/include.
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${TPUSIM_GEN_DIR}> $<INSTALL_INTERFACE:include>)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Woverloaded-virtual -Wimplicit-fallthrough -Wcast-qual -Wformat=2>)
  if(TPUSIM_ARCH_FLAGS)
    separate_arguments(arch_flags UNIX_COMMAND "${TPUSIM_ARCH_FLAGS}")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${arch_flags}>)
  endif()
  if(TPUSIM_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
