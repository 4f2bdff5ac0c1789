# tpusim_proto_library(<target> <file.proto>...): a static library of the generated C++.
# Protos are named by their path from the repository root ("configs/config.proto"), so the
# generated header is included as "configs/config.pb.h" from build/gen.
function(tpusim_proto_library target)
  set(srcs)
  set(hdrs)
  foreach(proto ${ARGN})
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${proto})
    string(REGEX REPLACE "\\.proto$" "" stem ${rel})
    set(cc ${TPUSIM_GEN_DIR}/${stem}.pb.cc)
    set(h ${TPUSIM_GEN_DIR}/${stem}.pb.h)
    add_custom_command(
      OUTPUT ${cc} ${h}
      COMMAND ${Protobuf_PROTOC_EXECUTABLE} --proto_path=${PROJECT_SOURCE_DIR}
              --cpp_out=${TPUSIM_GEN_DIR} ${rel}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${proto} ${Protobuf_PROTOC_EXECUTABLE}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      COMMENT "protoc ${rel}"
      VERBATIM)
    list(APPEND srcs ${cc})
    list(APPEND hdrs ${h})
  endforeach()
  add_library(${target} STATIC ${srcs} ${hdrs})
  # protoc's files each define the same file-scope tables (schemas, file_default_instances).
  set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${TPUSIM_GEN_DIR}>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf)
endfunction()
