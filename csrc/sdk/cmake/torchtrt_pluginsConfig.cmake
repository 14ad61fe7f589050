# CMake package of torchtrt_plugins' C++ SDK: build the plugin library of ops declared with torchtrt_plugins.declare
# from your kernel launchers, as torchtrt_plugins.sdk.PluginLibrary builds it (same sources, flags and exports: both
# read ../sdk_build.json; torchtrt_plugins_recipe.cmake, which torchtrt_plugins' own CMakeLists.txt includes too, is
# where CMake reads it).
#
#   cmake -S . -B build -Dtorchtrt_plugins_DIR="$(python -m torchtrt_plugins sdk --cmake-dir)"
#
#   find_package(torchtrt_plugins REQUIRED)
#   torchtrt_plugins_add_library(myops MODULE myops SOURCES myops/csrc/myops.cu PYTHONPATH ${CMAKE_CURRENT_SOURCE_DIR})
#
# torchtrt_plugins_add_library(<name> MODULE <module> SOURCES <launcher sources>...
#                              [INCLUDE_DIRECTORIES <dirs>...] [PYTHONPATH <dirs>...])
#   <name> is the name of the sdk.PluginLibrary the ops of the Python module <module> are declared on. At build time
#   `python -m torchtrt_plugins sdk generate` writes the op tables and the fields header (op_fields.h: the index
#   constants launchers read LaunchArgs::scalars by, e.g. myops::fields::scaled_add::kALPHA) from the declarations
#   (rerun when a file of <module>'s package or of torchtrt_plugins that it imported changes); then two targets:
#     <name>_plugins    lib<name>_plugins.so: the TensorRT plugin library (links the CUDA runtime only, exports only
#                       getCreators and setLoggerFinder): trtexec --dynamicPlugins, plugins_to_serialize, load_library;
#     <name>_launchers  lib<name>_launchers.so: the launchers behind the C entry points the op's eager kernel calls;
#   the launcher sources are compiled once (OBJECT library <name>_launcher_objects) into both.
#
# Also provides: torchtrt_plugins::sdk (INTERFACE: the SDK headers, e.g. sdk/ttp_sdk.h, the launcher ABI);
# TORCHTRT_PLUGINS_PYTHON (the interpreter with this torchtrt_plugins: Python_EXECUTABLE / Python3_EXECUTABLE when
# set, else FindPython3, which prefers an active virtual environment); TORCHTRT_PLUGINS_INCLUDE_DIR;
# TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR (TensorRT 10.x/11.x headers found by the Python package's own search:
# -DTENSORRT_INCLUDE_DIR, -DTENSORRT_ROOT, the same environment variables, then the system folders).
if(CMAKE_VERSION VERSION_LESS 3.24)
  message(FATAL_ERROR "torchtrt_plugins: the SDK's CMake package needs CMake 3.24 or newer, this is ${CMAKE_VERSION}")
endif()
get_property(_ttp_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
foreach(_ttp_language IN ITEMS CXX CUDA)
  if(NOT _ttp_language IN_LIST _ttp_languages)
    enable_language(${_ttp_language})
  endif()
endforeach()
include(CMakeFindDependencyMacro)
find_dependency(CUDAToolkit)
include("${CMAKE_CURRENT_LIST_DIR}/torchtrt_plugins_recipe.cmake")

get_property(_ttp_configured GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON SET)
if(NOT _ttp_configured)
  if(NOT TORCHTRT_PLUGINS_PYTHON)
    if(Python_EXECUTABLE)
      set(_ttp_python "${Python_EXECUTABLE}")
    elseif(Python3_EXECUTABLE)
      set(_ttp_python "${Python3_EXECUTABLE}")
    else()
      find_package(Python3 REQUIRED COMPONENTS Interpreter)
      set(_ttp_python "${Python3_EXECUTABLE}")
    endif()
    set(TORCHTRT_PLUGINS_PYTHON "${_ttp_python}" CACHE FILEPATH
      "Python interpreter with torchtrt_plugins installed (generates the op tables)")
  endif()
  # The TensorRT headers: a CMake variable wins over the environment; the search itself is the Python package's.
  set(_ttp_env)
  if(TENSORRT_INCLUDE_DIR)
    set(_ttp_env "TENSORRT_INCLUDE_DIR=${TENSORRT_INCLUDE_DIR}")
  elseif(TENSORRT_ROOT)
    set(_ttp_env --unset=TENSORRT_INCLUDE_DIR "TENSORRT_ROOT=${TENSORRT_ROOT}")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ${_ttp_env}
      ${TORCHTRT_PLUGINS_PYTHON} -m torchtrt_plugins sdk --cmake-dir --tensorrt-include-dir
    RESULT_VARIABLE _ttp_status OUTPUT_VARIABLE _ttp_out ERROR_VARIABLE _ttp_err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _ttp_status EQUAL 0)
    message(FATAL_ERROR "torchtrt_plugins: `${TORCHTRT_PLUGINS_PYTHON} -m torchtrt_plugins sdk --cmake-dir "
      "--tensorrt-include-dir` failed (status ${_ttp_status}):\n${_ttp_err}\nThe generator needs the Python "
      "interpreter this package belongs to (set -DTORCHTRT_PLUGINS_PYTHON=...) and the TensorRT headers (set "
      "-DTENSORRT_INCLUDE_DIR=... or -DTENSORRT_ROOT=...).")
  endif()
  string(REPLACE "\n" ";" _ttp_out "${_ttp_out}")
  list(GET _ttp_out 0 _ttp_python_cmake_dir)
  list(GET _ttp_out 1 _ttp_tensorrt_include_dir)
  file(REAL_PATH "${_ttp_python_cmake_dir}" _ttp_python_cmake_dir)
  file(REAL_PATH "${CMAKE_CURRENT_LIST_DIR}" _ttp_cmake_dir)
  if(NOT _ttp_python_cmake_dir STREQUAL _ttp_cmake_dir)
    message(FATAL_ERROR "torchtrt_plugins: ${TORCHTRT_PLUGINS_PYTHON} imports a torchtrt_plugins whose CMake package "
      "is ${_ttp_python_cmake_dir}, not this one (${_ttp_cmake_dir}): set -DTORCHTRT_PLUGINS_PYTHON= to the Python "
      "that `-Dtorchtrt_plugins_DIR=$(python -m torchtrt_plugins sdk --cmake-dir)` ran")
  endif()
  # Functions and targets may be used in other directories than find_package's: keep the results global.
  set_property(GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON "${TORCHTRT_PLUGINS_PYTHON}")
  set_property(GLOBAL PROPERTY _TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR "${_ttp_tensorrt_include_dir}")
  message(STATUS "torchtrt_plugins SDK: ${_ttp_recipe_include_dir}; TensorRT headers: ${_ttp_tensorrt_include_dir}; "
    "Python: ${TORCHTRT_PLUGINS_PYTHON}")
endif()
get_property(TORCHTRT_PLUGINS_PYTHON GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON)
get_property(TORCHTRT_PLUGINS_INCLUDE_DIR GLOBAL PROPERTY _TORCHTRT_PLUGINS_INCLUDE_DIR)
get_property(TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR GLOBAL PROPERTY _TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR)
function(torchtrt_plugins_add_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "MODULE" "SOURCES;INCLUDE_DIRECTORIES;PYTHONPATH")
  set(usage "torchtrt_plugins_add_library(<name> MODULE <python module> SOURCES <launcher sources>... "
    "[INCLUDE_DIRECTORIES <dirs>...] [PYTHONPATH <dirs>...])")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "torchtrt_plugins_add_library(${name}): unexpected arguments ${arg_UNPARSED_ARGUMENTS}; "
      ${usage})
  endif()
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "torchtrt_plugins_add_library: <name> must be an identifier (the sdk.PluginLibrary's name), "
      "got '${name}'")
  endif()
  if(NOT arg_MODULE OR NOT arg_SOURCES)
    message(FATAL_ERROR "torchtrt_plugins_add_library(${name}): MODULE (the Python module whose import declares the "
      "ops on PluginLibrary(\"${name}\", ...)) and SOURCES (the launcher sources) are required: " ${usage})
  endif()
  get_property(python GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON)
  get_property(tensorrt_include_dir GLOBAL PROPERTY _TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR)
  _torchtrt_plugins_recipe(plugin_table generated_plugin_source)
  _torchtrt_plugins_recipe(launcher_table generated_launcher_source)
  _torchtrt_plugins_recipe(fields_header generated_fields_header)

  set(generated "${CMAKE_CURRENT_BINARY_DIR}/${name}_generated")
  set(plugin_table "${generated}/${plugin_table}")
  set(launcher_table "${generated}/${launcher_table}")
  set(fields_header "${generated}/${fields_header}")
  set(pythonpath ${arg_PYTHONPATH})
  if(DEFINED ENV{PYTHONPATH})
    list(APPEND pythonpath "$ENV{PYTHONPATH}")
  endif()
  string(JOIN ":" pythonpath ${pythonpath})
  # Kernels written in Python (Triton, CUDA source) are compiled to cubin for the architectures CUDA code is built for.
  string(JOIN "," archs ${CMAKE_CUDA_ARCHITECTURES})
  add_custom_command(
    OUTPUT "${plugin_table}" "${launcher_table}" "${fields_header}"
    COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${pythonpath}" ${python} -m torchtrt_plugins sdk generate
      --module ${arg_MODULE} --library ${name} --out "${generated}" --depfile "${generated}/generate.d"
      --archs "${archs}"
    DEPFILE "${generated}/generate.d"
    COMMENT "torchtrt_plugins: op tables of ${name} from the declarations in ${arg_MODULE}"
    VERBATIM)
  # Both libraries and the launchers compile a generated file: one target runs the generator, so that they never run
  # it in parallel.
  add_custom_target(${name}_tables DEPENDS "${plugin_table}" "${launcher_table}" "${fields_header}")

  add_library(${name}_launcher_objects OBJECT ${arg_SOURCES})
  _torchtrt_plugins_add_products(${name} ${name}_launcher_objects "${generated}" "${tensorrt_include_dir}")
  foreach(target IN ITEMS ${name}_launcher_objects ${name}_plugins ${name}_launchers)
    target_include_directories(${target} PRIVATE ${arg_INCLUDE_DIRECTORIES})
  endforeach()
  add_dependencies(${name}_launcher_objects ${name}_tables)
  add_dependencies(${name}_plugins ${name}_tables)
  add_dependencies(${name}_launchers ${name}_tables)
endfunction()
