# tpusim_embed_files(<output.cc> <namespace> <file>...): compiles text files into the binary
# as a sorted table {name, contents}, so `tpusim` finds its configs from any directory.
function(tpusim_embed_files output namespace)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DNAMESPACE=${namespace}
            "-DFILES=${ARGN}" -P ${PROJECT_SOURCE_DIR}/cmake/TpusimEmbedScript.cmake
    DEPENDS ${ARGN} ${PROJECT_SOURCE_DIR}/cmake/TpusimEmbedScript.cmake
    COMMENT "embedding ${namespace} files"
    VERBATIM)
endfunction()
