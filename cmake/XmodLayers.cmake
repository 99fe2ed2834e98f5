# Library layers (docs/architecture.md, "Library layers"). Every target and every source file
# belongs to the layer of the top-level folder that holds it, and inside a folder with
# sub-layers (the coordinator) to the layer of its sub-folder. A target may link, and a file
# may #include, only its own layer or lower ones; tests are targets too, so no test of a lower
# layer links a higher library. Besides, SQL text and sqlite3 appear only in the folders of
# XMOD_SQL_FOLDERS: everything else reaches the database through their functions.
#
# Configure time: xmod_check_layers(), called once every folder is added, checks each link of
# every target and then every source file; it stops CMake naming the first violation.
# Script mode, for the test that injects violations into a copy of the tree:
#   cmake -DXMOD_SOURCE_DIR=<tree> -P cmake/XmodLayers.cmake
# Checking direct links and includes is enough: a chain that ends higher than it starts has
# one step that goes up.
include_guard(GLOBAL)
cmake_policy(VERSION 3.22)

# Lowest first; folders of one layer may use each other.
set(XMOD_LAYERS
  "proto common"
  "resultsdb trainer_contract"
  "data model"
  "fitter"
  "coordinator worker cli dashboard"
  "tests bench fuzz")

# The coordinator's sub-folders, lowest first; "." is the folder itself (the process that
# wires the layers together).
set(XMOD_SUBLAYERS_coordinator
  "store metrics spec"
  "scheduling fitting"
  "adaptive"
  "api"
  "."
  "tests")

# Where SQL may be written: the results database library and the coordinator's store.
set(XMOD_SQL_FOLDERS "resultsdb" "coordinator/store")
# Folders that hold rows and SQL only: of the project's folders they include just these. Domain
# types (the fitter's, the trainer's) are built from rows above them; model/accounting is the
# FLOP arithmetic of run progress, derived on every read (coordinator/store/run_progress.h),
# and trainer_contract/series.h the names of the metric series the rows hold.
set(XMOD_ROWS_ONLY_FOLDERS "coordinator/store")
set(XMOD_ROWS_ONLY_MAY_INCLUDE "proto/" "common/" "resultsdb/" "coordinator/store/"
  "model/accounting/" "trainer_contract/series.h")
# A string literal that starts with an SQL keyword, or any use of the sqlite3 library.
set(_XMOD_SQL_REGEX
  "(\"|R\"[a-z]*\\()[ \t\n]*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|WITH|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|FROM|WHERE|VALUES|ORDER BY|GROUP BY|JOIN)[ \t\n]|sqlite3")

# The index in `layers` (a list of space-separated folder groups) of `folder`; -1 if none.
function(_xmod_index_in layers folder out)
  set(found -1)
  set(index 0)
  foreach(folders IN LISTS layers)
    string(REPLACE " " ";" folders "${folders}")
    if(folder IN_LIST folders)
      set(found ${index})
    endif()
    math(EXPR index "${index} + 1")
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# The layer of a path relative to the source root, as "top;sub": top is the index in
# XMOD_LAYERS (-1 outside every layer), sub the index among the top folder's sub-layers (-1
# when the top folder has none).
function(_xmod_layer_of_path rel out)
  string(REGEX REPLACE "/.*" "" top_name "${rel}")
  _xmod_index_in("${XMOD_LAYERS}" "${top_name}" top)
  set(sub -1)
  if(DEFINED XMOD_SUBLAYERS_${top_name})
    set(sub_name ".")
    if(rel MATCHES "^${top_name}/([^/]+)/")
      set(sub_name "${CMAKE_MATCH_1}")
    endif()
    _xmod_index_in("${XMOD_SUBLAYERS_${top_name}}" "${sub_name}" sub)
  endif()
  set(${out} "${top};${sub};${top_name}" PARENT_SCOPE)
endfunction()

# Sets `out` to TRUE when something in layer `from` may use something in layer `to`.
function(_xmod_may_use from to out)
  list(GET from 0 from_top)
  list(GET to 0 to_top)
  list(GET from 1 from_sub)
  list(GET to 1 to_sub)
  list(GET from 2 from_name)
  list(GET to 2 to_name)
  set(ok TRUE)
  if(from_top GREATER_EQUAL 0 AND to_top GREATER from_top)
    set(ok FALSE)
  elseif(from_name STREQUAL to_name AND from_sub GREATER_EQUAL 0 AND to_sub GREATER from_sub)
    set(ok FALSE)
  endif()
  set(${out} ${ok} PARENT_SCOPE)
endfunction()

function(_xmod_layer_of_target target out)
  get_target_property(dir ${target} SOURCE_DIR)
  file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${dir}")
  _xmod_layer_of_path("${rel}/" layer)
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

# Every target defined in `dir` and the folders below it, appended to `out`.
function(_xmod_targets_under dir out)
  get_directory_property(targets DIRECTORY "${dir}" BUILDSYSTEM_TARGETS)
  get_directory_property(subdirs DIRECTORY "${dir}" SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _xmod_targets_under("${sub}" below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(_xmod_check_target_links)
  _xmod_targets_under("${PROJECT_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    _xmod_layer_of_target(${target} layer)
    get_target_property(links ${target} LINK_LIBRARIES)
    get_target_property(interface_links ${target} INTERFACE_LINK_LIBRARIES)
    foreach(linked IN LISTS links interface_links)
      if(NOT TARGET "${linked}")
        continue()  # a system library, a flag, a generator expression
      endif()
      get_target_property(aliased ${linked} ALIASED_TARGET)
      if(aliased)
        set(linked ${aliased})
      endif()
      get_target_property(imported ${linked} IMPORTED)
      if(imported)
        continue()
      endif()
      _xmod_layer_of_target(${linked} linked_layer)
      _xmod_may_use("${layer}" "${linked_layer}" ok)
      if(NOT ok)
        get_target_property(dir ${target} SOURCE_DIR)
        get_target_property(linked_dir ${linked} SOURCE_DIR)
        message(FATAL_ERROR "library layers: ${target} (${dir}) links ${linked} "
          "(${linked_dir}), a higher layer; see XMOD_LAYERS in cmake/XmodLayers.cmake "
          "and docs/architecture.md")
      endif()
    endforeach()
  endforeach()
endfunction()

# TRUE when `rel` is a non-test source in one of XMOD_ROWS_ONLY_FOLDERS.
function(_xmod_rows_only rel out)
  set(found FALSE)
  foreach(folder IN LISTS XMOD_ROWS_ONLY_FOLDERS)
    if(rel MATCHES "^${folder}/" AND NOT rel MATCHES "_test\\.cc$")
      set(found TRUE)
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# TRUE when a rows-only folder may include `included` (of layer `included_layer`): outside the
# project's layers (a library), or under one of XMOD_ROWS_ONLY_MAY_INCLUDE.
function(_xmod_rows_only_may_include included included_layer out)
  list(GET included_layer 0 top)
  set(ok FALSE)
  if(top LESS 0)
    set(ok TRUE)
  endif()
  foreach(prefix IN LISTS XMOD_ROWS_ONLY_MAY_INCLUDE)
    string(FIND "${included}" "${prefix}" at)
    if(at EQUAL 0)
      set(ok TRUE)
    endif()
  endforeach()
  set(${out} ${ok} PARENT_SCOPE)
endfunction()

# Checks every C++ source under `root`: its project includes go to its own layer or lower (and
# in XMOD_ROWS_ONLY_FOLDERS to XMOD_ROWS_ONLY_MAY_INCLUDE), and only the folders of
# XMOD_SQL_FOLDERS hold SQL. Tests may hold SQL (they inspect the database).
# Stops naming every violation.
function(xmod_check_source_layers root)
  file(GLOB_RECURSE sources RELATIVE "${root}" "${root}/*.h" "${root}/*.cc")
  list(FILTER sources EXCLUDE REGEX "^(build|\\.cache|var)/")
  foreach(rel IN LISTS sources)
    _xmod_layer_of_path("${rel}" layer)
    list(GET layer 0 top)
    if(top LESS 0)
      continue()
    endif()
    file(READ "${root}/${rel}" text)
    _xmod_rows_only("${rel}" rows_only)
    string(REGEX MATCHALL "#include \"[a-z_]+/[^\"]+\"" includes "${text}")
    foreach(include IN LISTS includes)
      string(REGEX REPLACE "#include \"([^\"]+)\"" "\\1" included "${include}")
      _xmod_layer_of_path("${included}" included_layer)
      _xmod_may_use("${layer}" "${included_layer}" ok)
      if(NOT ok)
        list(APPEND problems "${rel} includes ${included}, a higher layer")
      elseif(rows_only)
        _xmod_rows_only_may_include("${included}" "${included_layer}" ok)
        if(NOT ok)
          list(APPEND problems "${rel} includes ${included}, which is not rows or SQL")
        endif()
      endif()
    endforeach()
    set(may_hold_sql FALSE)
    foreach(folder IN LISTS XMOD_SQL_FOLDERS)
      if(rel MATCHES "^${folder}/")
        set(may_hold_sql TRUE)
      endif()
    endforeach()
    if(NOT may_hold_sql AND NOT rel MATCHES "(_test\\.cc|/test_util\\.(h|cc)|^tests/.*|^bench/.*|^fuzz/.*)$")
      if(text MATCHES "${_XMOD_SQL_REGEX}")
        list(APPEND problems "${rel} holds SQL ('${CMAKE_MATCH_0}')")
      endif()
    endif()
  endforeach()
  if(problems)
    list(JOIN problems "\n  " problems)
    message(FATAL_ERROR "library layers:\n  ${problems}\nA file may include only its own "
      "layer or lower ones, and only ${XMOD_SQL_FOLDERS} may hold SQL; see XMOD_LAYERS in "
      "cmake/XmodLayers.cmake and docs/architecture.md")
  endif()
endfunction()

function(xmod_check_layers)
  _xmod_check_target_links()
  xmod_check_source_layers("${PROJECT_SOURCE_DIR}")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT XMOD_SOURCE_DIR)
    message(FATAL_ERROR "usage: cmake -DXMOD_SOURCE_DIR=<tree> -P XmodLayers.cmake")
  endif()
  xmod_check_source_layers("${XMOD_SOURCE_DIR}")
endif()
