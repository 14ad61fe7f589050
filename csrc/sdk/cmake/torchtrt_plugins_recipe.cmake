# The SDK's build recipe (../sdk_build.json, which torchtrt_plugins.sdk.PluginLibrary reads too) in CMake: included by
# the SDK's CMake package (torchtrt_pluginsConfig.cmake, for a user's ops) and by torchtrt_plugins' own CMakeLists.txt
# (for our declared ops), so that both build a declared-op library from one list of sources, flags and exports.
# Needs the CXX and CUDA languages and CUDAToolkit.
#
# Provides torchtrt_plugins::sdk (INTERFACE: the SDK headers, e.g. sdk/ttp_sdk.h, the launcher ABI) and
#   _torchtrt_plugins_recipe(<out> <key>)                  the value of <key> in the recipe (a list for a JSON array)
#   _torchtrt_plugins_compile_settings(<target>)           the recipe's compile settings on <target>
#   _torchtrt_plugins_add_products(<name> <objects> <tables dir> <TensorRT include dir>)
#     <name>_plugins (lib<name>_plugins.so) and <name>_launchers (lib<name>_launchers.so): the recipe's SDK sources,
#     the op tables in <tables dir> (the recipe's generated_*_source names) and the objects of the OBJECT library
#     <objects> (the launchers), compiled, linked and exported as the recipe says; <tables dir> is on the include path
#     of all three, for the generated fields header (the recipe's generated_fields_header) that launchers include.
get_filename_component(_ttp_recipe_include_dir "${CMAKE_CURRENT_LIST_DIR}/../.." REALPATH)
set_property(GLOBAL PROPERTY _TORCHTRT_PLUGINS_INCLUDE_DIR "${_ttp_recipe_include_dir}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_ttp_recipe_include_dir}/sdk/sdk_build.json")

if(NOT TARGET torchtrt_plugins::sdk)
  add_library(torchtrt_plugins::sdk INTERFACE IMPORTED GLOBAL)
  set_target_properties(torchtrt_plugins::sdk PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_ttp_recipe_include_dir};${CUDAToolkit_INCLUDE_DIRS}")
endif()

function(_torchtrt_plugins_recipe out key)
  get_property(include_dir GLOBAL PROPERTY _TORCHTRT_PLUGINS_INCLUDE_DIR)
  file(READ "${include_dir}/sdk/sdk_build.json" recipe)
  string(JSON type TYPE "${recipe}" ${key})
  if(NOT type STREQUAL "ARRAY")
    string(JSON value GET "${recipe}" ${key})
    set(${out} "${value}" PARENT_SCOPE)
    return()
  endif()
  string(JSON count LENGTH "${recipe}" ${key})
  set(values)
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON item GET "${recipe}" ${key} ${i})
      list(APPEND values "${item}")
    endforeach()
  endif()
  set(${out} "${values}" PARENT_SCOPE)
endfunction()

# C++ by the host compiler, CUDA by nvcc, as nvcc does for PluginLibrary.
function(_torchtrt_plugins_compile_settings target)
  _torchtrt_plugins_recipe(standard cxx_standard)
  _torchtrt_plugins_recipe(optimization optimization)
  _torchtrt_plugins_recipe(host_flags host_compiler_flags)
  _torchtrt_plugins_recipe(cuda_flags cuda_flags)
  _torchtrt_plugins_recipe(runtime cuda_runtime)
  string(JOIN "," xcompiler ${host_flags})
  string(SUBSTRING "${runtime}" 0 1 first)
  string(SUBSTRING "${runtime}" 1 -1 rest)
  string(TOUPPER "${first}" first)
  set_target_properties(${target} PROPERTIES
    CXX_STANDARD ${standard} CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
    CUDA_STANDARD ${standard} CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
    POSITION_INDEPENDENT_CODE ON CUDA_RUNTIME_LIBRARY "${first}${rest}")
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${optimization};${host_flags}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:${optimization};-Xcompiler=${xcompiler};${cuda_flags}>")
  target_link_libraries(${target} PRIVATE torchtrt_plugins::sdk CUDA::cudart)
endfunction()

function(_torchtrt_plugins_add_products name objects tables tensorrt_include_dir)
  get_property(include_dir GLOBAL PROPERTY _TORCHTRT_PLUGINS_INCLUDE_DIR)
  _torchtrt_plugins_recipe(plugin_sources plugin_sources)
  _torchtrt_plugins_recipe(launcher_sources launcher_sources)
  _torchtrt_plugins_recipe(plugin_table generated_plugin_source)
  _torchtrt_plugins_recipe(launcher_table generated_launcher_source)
  _torchtrt_plugins_recipe(version_script version_script)
  _torchtrt_plugins_recipe(launcher_version_script launcher_version_script)
  _torchtrt_plugins_recipe(linker_flags linker_flags)
  _torchtrt_plugins_recipe(link_libraries plugin_link_libraries)
  list(TRANSFORM plugin_sources PREPEND "${include_dir}/")
  list(TRANSFORM launcher_sources PREPEND "${include_dir}/")
  set(version_script "${include_dir}/${version_script}")
  set(launcher_version_script "${include_dir}/${launcher_version_script}")

  add_library(${name}_plugins MODULE ${plugin_sources} "${tables}/${plugin_table}" $<TARGET_OBJECTS:${objects}>)
  add_library(${name}_launchers MODULE ${launcher_sources} "${tables}/${launcher_table}" $<TARGET_OBJECTS:${objects}>)
  foreach(target IN ITEMS ${objects} ${name}_plugins ${name}_launchers)
    _torchtrt_plugins_compile_settings(${target})
    target_include_directories(${target} PRIVATE "${tables}")
  endforeach()
  target_include_directories(${name}_plugins PRIVATE "${tensorrt_include_dir}")
  list(TRANSFORM linker_flags PREPEND "LINKER:")
  target_link_options(${name}_plugins PRIVATE "LINKER:--version-script=${version_script}" ${linker_flags})
  target_link_libraries(${name}_plugins PRIVATE ${link_libraries})
  set_target_properties(${name}_plugins PROPERTIES LINK_DEPENDS "${version_script}")
  # Only the SDK's C entry points: a toolchain that links libstdc++ statically must not export it from here.
  target_link_options(${name}_launchers PRIVATE "LINKER:--version-script=${launcher_version_script}" ${linker_flags})
  set_target_properties(${name}_launchers PROPERTIES LINK_DEPENDS "${launcher_version_script}")
endfunction()

# _torchtrt_plugins_add_declared_library(<name> <module> <python> <pythonpath list> <TensorRT include dir>
#                                        <sources list> <include dirs list>)
#   The products of _torchtrt_plugins_add_products for the ops the Python module <module> declares on
#   sdk.PluginLibrary("<name>", ...), with op tables that `<python> -m torchtrt_plugins sdk generate` writes at build
#   time: torchtrt_plugins_add_library (the SDK's CMake package) for a user's ops, and torchtrt_plugins' own
#   CMakeLists.txt for torchtrt_plugins.vision's in a wheel.
function(_torchtrt_plugins_add_declared_library name module python pythonpath tensorrt_include_dir sources includes)
  _torchtrt_plugins_recipe(plugin_table generated_plugin_source)
  _torchtrt_plugins_recipe(launcher_table generated_launcher_source)
  _torchtrt_plugins_recipe(fields_header generated_fields_header)

  set(generated "${CMAKE_CURRENT_BINARY_DIR}/${name}_generated")
  set(plugin_table "${generated}/${plugin_table}")
  set(launcher_table "${generated}/${launcher_table}")
  set(fields_header "${generated}/${fields_header}")
  string(JOIN ":" pythonpath ${pythonpath})
  # Kernels written in Python (Triton, CUDA source) are compiled to cubin for the architectures CUDA code is built for.
  string(JOIN "," archs ${CMAKE_CUDA_ARCHITECTURES})
  add_custom_command(
    OUTPUT "${plugin_table}" "${launcher_table}" "${fields_header}"
    COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${pythonpath}" ${python} -m torchtrt_plugins sdk generate
      --module ${module} --library ${name} --out "${generated}" --depfile "${generated}/generate.d"
      --archs "${archs}"
    DEPFILE "${generated}/generate.d"
    COMMENT "torchtrt_plugins: op tables of ${name} from the declarations in ${module}"
    VERBATIM)
  # Both libraries and the launchers compile a generated file: one target runs the generator, so that they never run
  # it in parallel.
  add_custom_target(${name}_tables DEPENDS "${plugin_table}" "${launcher_table}" "${fields_header}")

  add_library(${name}_launcher_objects OBJECT ${sources})
  _torchtrt_plugins_add_products(${name} ${name}_launcher_objects "${generated}" "${tensorrt_include_dir}")
  foreach(target IN ITEMS ${name}_launcher_objects ${name}_plugins ${name}_launchers)
    target_include_directories(${target} PRIVATE ${includes})
  endforeach()
  add_dependencies(${name}_launcher_objects ${name}_tables)
  add_dependencies(${name}_plugins ${name}_tables)
  add_dependencies(${name}_launchers ${name}_tables)
endfunction()
