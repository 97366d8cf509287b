# dfarm_flatc(TARGET SCHEMA OUT_DIR): compiles SCHEMA with Debian's flatc into
# OUT_DIR/<name>_generated.h and adds an INTERFACE library TARGET for it.
function(dfarm_flatc target schema out_dir)
  get_filename_component(name ${schema} NAME_WE)
  set(header ${out_dir}/${name}_generated.h)
  add_custom_command(
    OUTPUT ${header}
    COMMAND ${DFARM_FLATC} --cpp --scoped-enums -o ${out_dir} ${schema}
    DEPENDS ${schema} ${DFARM_FLATC}
    COMMENT "flatc ${name}.fbs"
    VERBATIM)
  add_custom_target(${target}_gen DEPENDS ${header})
  add_library(${target} INTERFACE)
  add_dependencies(${target} ${target}_gen)
  target_link_libraries(${target} INTERFACE flatbuffers::flatbuffers)
endfunction()
