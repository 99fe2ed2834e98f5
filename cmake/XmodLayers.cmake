# Library layers (docs/architecture.md, "Library layers"). Every target belongs to the layer
# of the top-level folder that defines it and may link only targets of its own layer or of
# lower ones; tests are targets too, so no test of a lower layer links a higher library.
# xmod_check_layers(), called once every folder is added, checks each link of every target
# and stops CMake naming the first link that goes up. Checking direct links is enough: a
# chain that ends higher than it starts has a link that goes up.
include_guard(GLOBAL)

# Lowest first; folders of one layer may link each other.
set(XMOD_LAYERS
  "proto common"
  "resultsdb trainer_contract"
  "data model"
  "fitter"
  "coordinator worker cli dashboard"
  "tests bench fuzz")

# The index in XMOD_LAYERS of the folder that defines `target`; -1 outside every layer.
function(_xmod_layer_of target out)
  get_target_property(dir ${target} SOURCE_DIR)
  file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${dir}")
  string(REGEX REPLACE "/.*" "" top "${rel}")
  set(layer -1)
  set(index 0)
  foreach(folders IN LISTS XMOD_LAYERS)
    string(REPLACE " " ";" folders "${folders}")
    if(top IN_LIST folders)
      set(layer ${index})
    endif()
    math(EXPR index "${index} + 1")
  endforeach()
  set(${out} ${layer} PARENT_SCOPE)
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

function(xmod_check_layers)
  _xmod_targets_under("${PROJECT_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    _xmod_layer_of(${target} layer)
    if(layer LESS 0)
      continue()
    endif()
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
      _xmod_layer_of(${linked} linked_layer)
      if(linked_layer GREATER layer)
        get_target_property(dir ${target} SOURCE_DIR)
        get_target_property(linked_dir ${linked} SOURCE_DIR)
        message(FATAL_ERROR "library layers: ${target} (${dir}) links ${linked} "
          "(${linked_dir}), a higher layer; see XMOD_LAYERS in cmake/XmodLayers.cmake "
          "and docs/architecture.md")
      endif()
    endforeach()
  endforeach()
endfunction()
